package cluster

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/admitfn/admitfn/core/cluster"
)

// maxCachedKey bounds the keys kept: a key holds what a caller sent (a
// SubjectAccessReview's user, groups and extra), and a cache full of huge
// ones would hold gigabytes. A larger key's answer is read, not kept.
const maxCachedKey = 4 << 10

// errTooManyReads is the answer while a cluster has maxInFlight reads
// outstanding: a review never queues behind a slow cluster.
var errTooManyReads = fmt.Errorf("%w: too many reads of the cluster in flight", cluster.ErrUnavailable)

// cache holds what was read of a cluster, by key: at most max entries, each
// for at most ttl, the least recently used dropped first. Concurrent misses
// of one key make one read. A found value and (unless forgetNotFound) a
// NotFound are remembered; any other error is not. Reads run on their own (bounded by readTimeout),
// so a caller whose deadline passes returns at once and the read still
// fills the cache for the next.
type cache[V any] struct {
	ttl, readTimeout time.Duration
	// forgetNotFound reads a key again on every miss instead of keeping
	// its NotFound: for namespaces, which a review may name just as they
	// are created (kube-apiserver reads one live when its informer has
	// not seen it).
	forgetNotFound bool
	max            int
	now            func() time.Time
	stats          *Stats
	// slots bounds the reads in flight, shared by every cache of the
	// cluster.
	slots chan struct{}

	mu      sync.Mutex
	entries map[string]*list.Element
	lru     list.List
	flights map[string]*flight[V]
}

type entry[V any] struct {
	key     string
	val     V
	err     error // nil or a NotFound
	expires time.Time
}

type flight[V any] struct {
	done chan struct{}
	val  V
	err  error
}

func newCache[V any](ttl time.Duration, max int, readTimeout time.Duration, slots chan struct{}, stats *Stats) *cache[V] {
	return &cache[V]{ttl: ttl, max: max, readTimeout: readTimeout, now: time.Now, stats: stats, slots: slots,
		entries: map[string]*list.Element{}, flights: map[string]*flight[V]{}}
}

// get returns key's value: cached, or read by read (once for every caller
// asking meanwhile), waiting no longer than ctx allows.
func (c *cache[V]) get(ctx context.Context, key string, read func(context.Context) (V, error)) (V, error) {
	var zero V
	c.mu.Lock()
	if el, ok := c.entries[key]; ok {
		e := el.Value.(*entry[V])
		if c.now().Before(e.expires) {
			c.lru.MoveToFront(el)
			c.mu.Unlock()
			c.stats.hits.Add(1)
			return e.val, e.err
		}
		c.lru.Remove(el)
		delete(c.entries, key)
	}
	f, waiting := c.flights[key]
	if !waiting {
		select {
		case c.slots <- struct{}{}:
		default:
			c.mu.Unlock()
			c.stats.errors.Add(1)
			return zero, errTooManyReads
		}
		f = &flight[V]{done: make(chan struct{})}
		c.flights[key] = f
		c.stats.reads.Add(1)
		go c.fill(key, f, read)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		if f.err != nil && !apierrors.IsNotFound(f.err) {
			c.stats.errors.Add(1)
		}
		return f.val, f.err
	case <-ctx.Done():
		c.stats.errors.Add(1)
		return zero, fmt.Errorf("%w: no answer before the review's deadline", cluster.ErrUnavailable)
	}
}

func (c *cache[V]) fill(key string, f *flight[V], read func(context.Context) (V, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), c.readTimeout)
	defer cancel()
	f.val, f.err = read(ctx)
	if errors.Is(f.err, context.DeadlineExceeded) {
		f.err = fmt.Errorf("%w: no answer in %s", cluster.ErrUnavailable, c.readTimeout)
	}
	c.mu.Lock()
	delete(c.flights, key)
	if (f.err == nil || apierrors.IsNotFound(f.err) && !c.forgetNotFound) && len(key) <= maxCachedKey {
		c.entries[key] = c.lru.PushFront(&entry[V]{key: key, val: f.val, err: f.err, expires: c.now().Add(c.ttl)})
		for c.lru.Len() > c.max {
			oldest := c.lru.Back()
			c.lru.Remove(oldest)
			delete(c.entries, oldest.Value.(*entry[V]).key)
			c.stats.evictions.Add(1)
		}
	}
	c.mu.Unlock()
	<-c.slots
	close(f.done)
}
