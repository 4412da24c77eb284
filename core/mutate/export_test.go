package mutate

import (
	"sync/atomic"

	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/admitfn/admitfn/core/celeval"
)

// NewDispatcherCountingSchema is NewDispatcher, with every use of the
// built-in schema counted in n.
func NewDispatcherCountingSchema(n *atomic.Int32) *Dispatcher {
	tc := newTypeConverters()
	tc.builtin = func() managedfields.TypeConverter {
		n.Add(1)
		return builtinConverter()
	}
	return newDispatcher(tc, celeval.NamespaceLister())
}
