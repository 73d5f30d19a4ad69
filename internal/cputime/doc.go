// Package cputime measures the CPU time of the running process, the
// figure benchmarks report next to wall-clock rates on a shared machine,
// where wall time depends on the other tenants' load.
package cputime
