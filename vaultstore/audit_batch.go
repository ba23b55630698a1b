package vaultstore

import (
	"context"
	"errors"
	"fmt"
)

// maxAuditBatch bounds the records one batch transaction writes.
const maxAuditBatch = 256

// errStoreClosed answers audit writes that arrive while the store closes.
var errStoreClosed = errors.New("the store is closing")

// auditBatcher writes the audit records of reads and detokenizations,
// with the activity markers of the tokens they used, in shared
// transactions: one goroutine takes every record waiting, writes them in
// one transaction, waits for the sync that makes them durable (group
// commit, as for every write), and only then answers each caller. While a
// batch commits, the next one gathers, so a busy vault writes many
// records per transaction and per sync instead of one.
//
// Nothing changes for the caller: its record is durable before it gets
// an answer, and if the batch fails every caller in it gets the error, so
// no read returns data its record does not cover (fail closed).
type auditBatcher struct {
	kv   KV
	reqs chan *auditWrite
	stop <-chan struct{}
}

type auditWrite struct {
	puts []*pendingPut // one access: its audit record and activity markers
	done chan error
}

func newAuditBatcher(kv KV, stop <-chan struct{}) *auditBatcher {
	return &auditBatcher{kv: kv, reqs: make(chan *auditWrite, maxAuditBatch), stop: stop}
}

// write queues puts and waits until the batch holding them is durable.
func (b *auditBatcher) write(ctx context.Context, puts []*pendingPut) error {
	w := &auditWrite{puts: puts, done: make(chan error, 1)}
	select {
	case b.reqs <- w:
	case <-b.stop:
		return fmt.Errorf("%w: %w", ErrAuditUnavailable, errStoreClosed)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-w.done:
		return err
	case <-b.stop: // a record queued as the batcher stopped is never answered
		return fmt.Errorf("%w: %w", ErrAuditUnavailable, errStoreClosed)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run writes batches until stop is closed, then fails what is left.
func (b *auditBatcher) run() {
	batch := make([]*auditWrite, 0, maxAuditBatch)
	for {
		select {
		case <-b.stop:
			b.failQueued()
			return
		case w := <-b.reqs:
			batch = append(batch[:0], w)
		}
	gather:
		for len(batch) < maxAuditBatch {
			select {
			case w := <-b.reqs:
				batch = append(batch, w)
			default:
				break gather
			}
		}
		err := b.kv.Update(context.Background(), func(tx Writer) error {
			for _, w := range batch {
				for _, p := range w.puts {
					if err := p.put(tx); err != nil {
						return err
					}
				}
			}
			return nil
		})
		for _, w := range batch {
			w.done <- err
		}
		clear(batch)
	}
}

func (b *auditBatcher) failQueued() {
	for {
		select {
		case w := <-b.reqs:
			w.done <- fmt.Errorf("%w: %w", ErrAuditUnavailable, errStoreClosed)
		default:
			return
		}
	}
}
