module github.com/dmindex/dmindex

go 1.26
