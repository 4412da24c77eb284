package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/admitfn/admitfn/core/cluster"
)

func testCache(ttl time.Duration, max, inFlight int) *cache[string] {
	return newCache[string](ttl, max, time.Minute, make(chan struct{}, inFlight), &Stats{})
}

func TestConcurrentMissesMakeOneRead(t *testing.T) {
	c := testCache(time.Minute, 10, 4)
	var reads atomic.Int64
	release := make(chan struct{})
	read := func(context.Context) (string, error) {
		reads.Add(1)
		<-release
		return "v", nil
	}
	var wg sync.WaitGroup
	var started sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			v, err := c.get(context.Background(), "ns", read)
			if err != nil || v != "v" {
				errs <- fmt.Errorf("got %q, %v", v, err)
			}
		}()
	}
	started.Wait()
	// Every caller is waiting or about to: let the one read finish.
	for c.stats.reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("%d reads, want 1", n)
	}
}

func TestCacheAgeAndSize(t *testing.T) {
	c := testCache(10*time.Second, 2, 4)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	reads := map[string]int{}
	read := func(key string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			reads[key]++
			return fmt.Sprintf("%s#%d", key, reads[key]), nil
		}
	}
	get := func(key string) string {
		v, err := c.get(context.Background(), key, read(key))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	steps := []struct {
		key, want string
		advance   time.Duration
	}{
		{"a", "a#1", 0},
		{"a", "a#1", 9 * time.Second},  // within the age
		{"a", "a#2", 10 * time.Second}, // stale: read again
		{"b", "b#1", 0},
		{"c", "c#1", 0}, // full: a, the least recently used, goes
		{"b", "b#1", 0},
		{"a", "a#3", 0},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if got := get(s.key); got != s.want {
			t.Errorf("step %d: %s = %q, want %q", i, s.key, got, s.want)
		}
	}
	if got := c.stats.Counts(); got.Evictions != 2 || got.Hits != 2 {
		t.Errorf("counts %+v, want 2 evictions (a, then c) and 2 hits", got)
	}
}

func TestErrorsAreNotRememberedButNotFoundIs(t *testing.T) {
	c := testCache(time.Minute, 10, 4)
	n := 0
	failing := func(context.Context) (string, error) {
		n++
		return "", fmt.Errorf("%w: refused", cluster.ErrUnavailable)
	}
	for range 2 {
		if _, err := c.get(context.Background(), "x", failing); !errors.Is(err, cluster.ErrUnavailable) {
			t.Fatalf("err %v", err)
		}
	}
	missing := func(context.Context) (string, error) {
		n++
		return "", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "y")
	}
	for range 2 {
		if _, err := c.get(context.Background(), "y", missing); !apierrors.IsNotFound(err) {
			t.Fatalf("err %v", err)
		}
	}
	if n != 3 {
		t.Errorf("%d reads, want 3: two errors, one NotFound", n)
	}
}

func TestASlowClusterNeverHoldsAReviewPastItsDeadline(t *testing.T) {
	c := testCache(time.Minute, 10, 1)
	release := make(chan struct{})
	defer close(release)
	slow := func(ctx context.Context) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "late", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.get(ctx, "a", slow)
	if !errors.Is(err, cluster.ErrUnavailable) || err.Error() != "cluster unavailable: no answer before the review's deadline" {
		t.Fatalf("err %v", err)
	}
	// The one slot is held by the read still running: another key is
	// refused at once rather than queued.
	_, err = c.get(context.Background(), "b", slow)
	if !errors.Is(err, errTooManyReads) {
		t.Fatalf("second read: %v, want too many reads in flight", err)
	}
	if got := c.stats.Counts(); got.Errors != 2 || got.Reads != 1 {
		t.Errorf("counts %+v, want 2 errors, 1 read", got)
	}
}

func TestReadTimeoutBoundsARead(t *testing.T) {
	c := newCache[string](time.Minute, 10, 20*time.Millisecond, make(chan struct{}, 1), &Stats{})
	_, err := c.get(context.Background(), "a", func(ctx context.Context) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	if err == nil || err.Error() != "cluster unavailable: no answer in 20ms" {
		t.Fatalf("err %v", err)
	}
}

// A key larger than maxCachedKey (what a caller's user info can make) is
// read every time, never kept.
func TestHugeKeysAreNotKept(t *testing.T) {
	c := testCache(time.Minute, 10, 4)
	reads := 0
	read := func(context.Context) (string, error) { reads++; return "v", nil }
	huge := strings.Repeat("g", maxCachedKey+1)
	for range 2 {
		if v, err := c.get(context.Background(), huge, read); err != nil || v != "v" {
			t.Fatalf("%q %v", v, err)
		}
	}
	if reads != 2 || c.lru.Len() != 0 {
		t.Errorf("%d reads, %d entries: want 2 reads and nothing kept", reads, c.lru.Len())
	}
}
