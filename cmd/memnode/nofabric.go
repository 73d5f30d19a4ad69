//go:build !fabric

package main

import (
	"flag"
	"io"

	"github.com/dmindex/dmindex/remote"
)

// addFabricFlags registers the flags of the fabric build; this build serves
// TCP only and has none.
func addFabricFlags(*flag.FlagSet) func(*remote.ServerConfig, io.Writer) (bool, error) {
	return func(*remote.ServerConfig, io.Writer) (bool, error) { return false, nil }
}
