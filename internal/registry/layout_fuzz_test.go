package registry

import "testing"

// FuzzTag checks that tags and geometry words decode to what was encoded,
// and that flag bits above the tag's fields (a repair flag) do not change
// what a tag names.
func FuzzTag(f *testing.F) {
	f.Add(uint16(0), uint8(0), uint64(1), uint32(1), uint32(1))
	f.Add(uint16(65535), uint8(255), uint64(1<<40+7), uint32(1<<24-1), uint32(256))
	f.Fuzz(func(t *testing.T, b uint16, k uint8, inc uint64, blocks, clients uint32) {
		w := tag(int(b), int(k), inc)
		for _, word := range []uint64{w, w | 1<<61} {
			gb, gk, ginc := parseTag(word)
			if !IsTag(word) || gb != int(b) || gk != int(k) || ginc != inc&incMask {
				t.Fatalf("tag(%d, %d, %d) = %#x parses as %d %d %d", b, k, inc, word, gb, gk, ginc)
			}
		}
		blocks, clients = blocks&(1<<24-1), clients&(1<<24-1)
		gb, gk, err := parseGeometry(geometry(int(blocks), int(clients)))
		if err != nil || gb != int(blocks) || gk != int(clients) {
			t.Fatalf("geometry(%d, %d) parses as %d %d, %v", blocks, clients, gb, gk, err)
		}
		if _, _, err := parseGeometry(uint64(blocks)); err == nil {
			t.Fatalf("a word without the magic parsed as a geometry")
		}
	})
}
