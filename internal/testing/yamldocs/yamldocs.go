// Package yamldocs splits multi-document YAML streams with apimachinery's
// reader, which knows a document separator from a "---" inside a string or
// a block scalar, so that the tests read manifests the way kubectl does.
package yamldocs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Split returns the documents of a YAML stream in order, each without its
// separator line. Documents that hold nothing but blank lines and comments
// (before a leading separator, or between two separators) are left out.
func Split(stream []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var out [][]byte
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		doc = withoutSeparator(doc)
		if !empty(doc) {
			out = append(out, doc)
		}
	}
}

// withoutSeparator drops the separator line the reader keeps at the start
// of the stream's first document.
func withoutSeparator(doc []byte) []byte {
	line, rest, _ := bytes.Cut(doc, []byte("\n"))
	if !bytes.HasPrefix(line, []byte("---")) {
		return doc
	}
	if after := bytes.TrimSpace(line[3:]); len(after) == 0 || after[0] == '#' {
		return rest
	}
	return doc
}

// empty says whether a document holds only blank lines and comments.
func empty(doc []byte) bool {
	for l := range bytes.Lines(doc) {
		if l = bytes.TrimSpace(l); len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}
