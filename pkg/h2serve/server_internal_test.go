package h2serve

import "testing"

func TestUploadBufferPerConnectionBounded(t *testing.T) {
	for _, c := range []struct {
		streams uint32
		want    int32
	}{
		{20, 20 * 256 * 1024},
		{100, 25 * 1024 * 1024},
		{1000, 25 * 1024 * 1024},
		{9000, 25 * 1024 * 1024}, // streams x 256 KiB would overflow an int32
	} {
		if got := uploadBufferPerConnection(c.streams); got != c.want {
			t.Errorf("%d streams: upload window %d bytes, want %d", c.streams, got, c.want)
		}
	}
}
