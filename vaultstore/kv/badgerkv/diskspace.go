package badgerkv

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tokenvault/tokenvault/vaultstore/kv"
)

// DefaultReadReserve is the last part of the free-space margin that only
// writes marked kv.WithSpaceReserve may use: the audit records of reads,
// which must be durable before a read answers. Once ordinary writes are
// refused, reads go on until they have used it (at about 1 KB a read,
// some 60,000 reads), and only then fail too.
const DefaultReadReserve = 64 << 20

// The free-space check reads the file system (statfs) only when its last
// reading may be wrong enough to matter: free space changes through the
// vault's own commits, which it counts, and through Badger's flushes and
// compactions and other programs, which the margin and these bounds
// cover. Badger's share of the margin is worked out again with a reading
// when it is nearAge old; until then each byte committed raises it (see
// needPerByte), since the tree those bytes join is larger.
const (
	// readingMaxAge: an older reading is renewed before it is trusted, and
	// the background loop renews it this often while the store is idle.
	readingMaxAge = time.Second
	// readingMaxSpent: a reading is renewed once writes admitted since it
	// may have used this much.
	readingMaxSpent = 16 << 20
	// nearBand: within this much of the line a reading is renewed every
	// nearAge, so that space freed meanwhile is seen.
	nearBand = 16 << 20
	nearAge  = 10 * time.Millisecond
	// resumeSlack: once writes are refused, they resume only when this
	// much more than the margin is free, so that a file system hovering at
	// the line does not flap (and log) on every commit. While writes are
	// refused, each one reads the file system again.
	resumeSlack = 1 << 20
	// spaceCheckInterval is how often the background loop looks, so that
	// writes resume, and recovery is logged, without any traffic.
	spaceCheckInterval = 2 * time.Second
)

// entryOverhead is what a memtable log spends on one entry beside its key
// and value (header, version, checksum; the value log as much again for a
// large value), and txnOverhead the record that ends a transaction.
const (
	entryOverhead = 2 * (22 + 8 + 4)
	txnOverhead   = 96
)

// spaceLevel is how full the file system is, for the vault's writes.
type spaceLevel int

const (
	spaceOK   spaceLevel = iota // every write admitted
	spaceLow                    // only reserved writes (reads' audit records) admitted
	spaceFull                   // every write refused
)

func (l spaceLevel) String() string {
	switch l {
	case spaceLow:
		return "low"
	case spaceFull:
		return "full"
	}
	return "ok"
}

// Disk is the state of the storage's file system.
type Disk struct {
	// Known is false when its free space cannot be read (writes are then
	// admitted unchecked).
	Known bool
	// FreeBytes is the space available to the vault, as last read, less
	// what writes admitted since may have used.
	FreeBytes int64
	// MarginBytes is the free space under which writes are refused: what
	// Badger may still write on its own, plus ReserveBytes.
	MarginBytes int64
	// ReserveBytes is the last part of the margin, which only the audit
	// records of reads may use.
	ReserveBytes int64
	// Writable reports whether writes are admitted.
	Writable bool
	// ReadsAudited reports whether the audit records of reads are
	// admitted (reads work).
	ReadsAudited bool
	// RefusedWrites counts the writes refused for want of space since the
	// store opened.
	RefusedWrites int64
}

// statfsFunc returns the bytes of dir's file system available to the
// process.
type statfsFunc func(dir string) (int64, error)

// spaceGuard admits a write only when the file system keeps the margin
// free after it (see margin.go).
type spaceGuard struct {
	dir     string
	statfs  statfsFunc
	need    func() int64 // Badger's share of the margin, for the tree as it is
	perByte int64        // how much need grows per byte committed, in eighths
	reserve int64
	now     func() time.Time
	logger  *zap.Logger

	mu      sync.Mutex
	known   bool
	free    int64 // at the last reading
	spent   int64 // admitted since the reading
	readAt  time.Time
	needNow int64 // need() at needAt
	needAt  time.Time
	grown   int64 // admitted since needAt
	held    int64 // room held for work outside the vault's writes (value-log GC)
	level   spaceLevel
	warned  bool // an unreadable file system was logged

	refused atomic.Int64
	low     atomic.Bool // level != spaceOK: a fast path for refusing
}

func newSpaceGuard(dir string, statfs statfsFunc, need func() int64, perByte, reserve int64, now func() time.Time, logger *zap.Logger) *spaceGuard {
	g := &spaceGuard{dir: dir, statfs: statfs, need: need, perByte: perByte, reserve: reserve, now: now, logger: logger}
	g.mu.Lock()
	g.readLocked(now())
	g.mu.Unlock()
	return g
}

// needLocked is Badger's share of the margin: as worked out at the last
// renewal, raised for the bytes admitted since (and n more) and by what
// is held for work outside the vault's writes.
func (g *spaceGuard) needLocked(n int64) int64 {
	return g.needNow + (g.grown+n)*g.perByte/8 + g.held
}

// lineLocked is the free space a write of n bytes must leave: the margin
// for an ordinary write, Badger's share alone for a reserved one, raised
// by resumeSlack while that kind is refused.
func (g *spaceGuard) lineLocked(reserved bool, n int64) int64 {
	need := g.needLocked(n)
	if reserved {
		if g.level == spaceFull {
			return need + resumeSlack
		}
		return need
	}
	if g.level != spaceOK {
		return need + g.reserve + resumeSlack
	}
	return need + g.reserve
}

// admit accounts for a write of about n bytes, or refuses it with an
// error wrapping kv.ErrNoSpace when it would leave less than the line
// free. A refusal always rests on a reading taken for it, and counts as
// the file system being too full for that kind of write.
func (g *spaceGuard) admit(n int64, reserved bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	age := now.Sub(g.readAt)
	line := g.lineLocked(reserved, n)
	est := g.free - g.spent - n
	if age >= readingMaxAge || g.spent >= readingMaxSpent || (est < line+nearBand && age >= nearAge) || est < line {
		g.readLocked(now)
		line = g.lineLocked(reserved, n)
		est = g.free - g.spent - n
	}
	if !g.known {
		return nil
	}
	if est < line {
		g.refused.Add(1)
		switch {
		case reserved:
			g.setLevelLocked(spaceFull)
		case g.level == spaceOK:
			g.setLevelLocked(spaceLow)
		}
		return fmt.Errorf("%w: %s would be left free on the storage's file system, %s must stay free for the storage engine's own writes",
			kv.ErrNoSpace, mib(max(est, 0)), mib(line))
	}
	g.spent += n
	g.grown += n
	return nil
}

// room is the space ordinary writes may still use, for work that Badger
// does outside the vault's writes (value-log garbage collection).
func (g *spaceGuard) room() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := g.now(); now.Sub(g.readAt) >= readingMaxAge {
		g.readLocked(now)
	}
	if !g.known {
		return 1 << 62
	}
	return g.free - g.spent - g.lineLocked(false, 0)
}

// hold raises Badger's share of the margin by n until release is called,
// for work Badger does outside the vault's writes.
func (g *spaceGuard) hold(n int64) (release func()) {
	g.mu.Lock()
	g.held += n
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.held -= n
		g.mu.Unlock()
	}
}

// refresh renews a reading older than readingMaxAge.
func (g *spaceGuard) refresh() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := g.now(); now.Sub(g.readAt) >= readingMaxAge {
		g.readLocked(now)
	}
}

// disk reports the file system's state, from a reading at most
// readingMaxAge old when fresh is set, else from the last one.
func (g *spaceGuard) disk(fresh bool) Disk {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := g.now(); fresh && now.Sub(g.readAt) >= readingMaxAge {
		g.readLocked(now)
	}
	d := Disk{Known: g.known, Writable: true, ReadsAudited: true, RefusedWrites: g.refused.Load()}
	if g.known {
		d.FreeBytes = max(g.free-g.spent, 0)
		d.MarginBytes = g.needLocked(0) + g.reserve
		d.ReserveBytes = g.reserve
		d.Writable = g.level == spaceOK
		d.ReadsAudited = g.level != spaceFull
	}
	return d
}

// readLocked reads the file system, renews Badger's share of the margin
// when it is nearAge old, and logs a change of level. Call with g.mu
// held.
func (g *spaceGuard) readLocked(now time.Time) {
	g.readAt, g.spent = now, 0
	free, err := g.statfs(g.dir)
	if err != nil {
		if !g.warned {
			g.warned = true
			g.logger.Warn("cannot read the free space of the storage's file system; writes are not checked against it",
				zap.String("dir", g.dir), zap.Error(err))
		}
		g.known = false
		g.setLevelLocked(spaceOK)
		return
	}
	g.known, g.free = true, free
	if g.needAt.IsZero() || now.Sub(g.needAt) >= nearAge {
		g.needNow, g.needAt, g.grown = g.need(), now, 0
	}
	level := spaceOK
	switch {
	case free < g.lineLocked(true, 0):
		level = spaceFull
	case free < g.lineLocked(false, 0):
		level = spaceLow
	}
	g.setLevelLocked(level)
}

// setLevelLocked moves to level, logging the change once.
func (g *spaceGuard) setLevelLocked(level spaceLevel) {
	if level == g.level {
		return
	}
	was := g.level
	g.level = level
	g.low.Store(level != spaceOK)
	if !g.known {
		return
	}
	fields := []zap.Field{zap.String("dir", g.dir), zap.Int64("free_bytes", g.free),
		zap.Int64("margin_bytes", g.needLocked(0)+g.reserve), zap.Int64("read_reserve_bytes", g.reserve)}
	switch {
	case level == spaceFull:
		g.logger.Error("the storage's file system is full: writes are refused (507), and so are reads, whose audit records no longer fit; free space on it and the vault resumes by itself", fields...)
	case level == spaceLow && was == spaceOK:
		g.logger.Warn("the storage's file system is nearly full: writes are refused (507) while less than the margin is free; reads go on; free space on it and writes resume by itself", fields...)
	case level == spaceLow:
		g.logger.Warn("the storage's file system has room for reads' audit records again: reads resumed, writes are still refused", fields...)
	default:
		g.logger.Info("the storage's file system has room again: writes resumed", fields...)
	}
}

// mib formats a byte count for messages.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
