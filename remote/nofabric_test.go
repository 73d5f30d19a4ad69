//go:build !fabric

package remote

import "testing"

// fabricPool is only in the fabric build.
func fabricPool(t testing.TB, _ Config) *Pool {
	t.Fatal("the fabric transport needs -tags fabric")
	return nil
}
