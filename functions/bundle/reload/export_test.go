package reload

import "context"

// Idle waits until no check is running, bounded by ctx.
func (r *Reloader) Idle(ctx context.Context) error {
	r.mu.Lock()
	done := r.running
	r.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
