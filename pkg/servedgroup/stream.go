package servedgroup

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// emptyItems ends a list encoded in compact JSON with no items: what a
// streamed list's head is cut from.
var emptyItems = []byte(`"items":[]}` + "\n")

// streamBufferSize is the buffer between the items' encodings and the
// response: writes of about this size, whatever the items'.
const streamBufferSize = 64 << 10

// encodeStream writes a list whose items are produced as it is written
// (registry.StreamList) in compact JSON, item by item: the bytes the
// whole list would encode to, with one item in memory at a time. Other
// encodings (protobuf, YAML, pretty JSON), whose head is not compact
// JSON, read the list whole.
func (e unstructuredListEncoder) encodeStream(l *registry.StreamList, w io.Writer) error {
	var head bytes.Buffer
	if err := e.Encode(l.List, &head); err != nil {
		return err
	}
	if !bytes.HasSuffix(head.Bytes(), emptyItems) {
		whole, err := l.Whole()
		if err != nil {
			return err
		}
		return e.Encode(whole, w)
	}
	bw := bufio.NewWriterSize(w, streamBufferSize)
	// Up to and including "items":[
	if _, err := bw.Write(head.Bytes()[:head.Len()-len("]}\n")]); err != nil {
		return err
	}
	first := true
	var werr error
	err := l.Each(func(obj runtime.Object) bool {
		data, err := json.Marshal(obj)
		if err != nil {
			werr = fmt.Errorf("encoding a list item: %w", err)
			return false
		}
		if !first {
			if werr = bw.WriteByte(','); werr != nil {
				return false
			}
		}
		first = false
		_, werr = bw.Write(data)
		return werr == nil
	})
	if err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	if _, err := bw.WriteString("]}\n"); err != nil {
		return err
	}
	return bw.Flush()
}
