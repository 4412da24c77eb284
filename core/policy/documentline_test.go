package policy

import (
	"reflect"
	"testing"
)

// DocumentLine counts documents as Parse does and points at each one's
// first line of content.
func TestDocumentLine(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []int
	}{
		{"one", "kind: A\n", []int{1}},
		{"leading separator", "---\nkind: A\n---\nkind: B\n", []int{2, 4}},
		{"comments and blanks", "# header\n\nkind: A\n---   # next\n\n# b\nkind: B", []int{3, 7}},
		{"empty document in the middle", "kind: A\n---\n# nothing\n---\nkind: C\n", []int{1, 0, 5}},
		{"double separator", "kind: A\n---\n---\nkind: C\n", []int{1, 4}},
		{"trailing separator", "kind: A\n---\n", []int{1}},
		{"leading blank lines then separator", "\n\n---\nkind: A\n", []int{4}},
		{"a separator-like line inside a block", "kind: A\ndata:\n  x: |\n    ----\n---\nkind: B\n", []int{1, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.data)
			docs, err := splitDocuments(data)
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) != len(tc.want) {
				t.Fatalf("splitDocuments gives %d documents, the case expects %d", len(docs), len(tc.want))
			}
			var got []int
			for n := 1; n <= len(docs)+1; n++ {
				got = append(got, DocumentLine(data, n))
			}
			if want := append(tc.want, 0); !reflect.DeepEqual(got, want) {
				t.Errorf("lines %v, want %v", got, want)
			}
		})
	}
}
