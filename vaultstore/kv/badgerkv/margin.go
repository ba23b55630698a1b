package badgerkv

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"
)

// Why the vault keeps free space for Badger
//
// Badger writes every file it creates through a memory map: the memtable
// logs (*.mem, made 2×MemTableSize long and sparse), the value logs
// (*.vlog, 2×ValueLogFileSize, sparse) and the tables that flushes and
// compactions write (*.sst: z.OpenMmapFile sizes the file with ftruncate,
// which allocates nothing, then table.CreateTable copies the table into
// the map). The file system allocates a block only when a page of the map
// is first written, and when it has none left that page fault is SIGBUS:
// the whole process dies, in a goroutine of Badger's that no recover can
// reach. Only the MANIFEST is appended with write(2), where a full disk is
// an error. Preallocating those files would turn a full disk into an
// error, but Badger creates them inside ristretto's z.OpenMmapFile, which
// offers no hook for it: not without forking both.
//
// Nor can Badger be told to stop: its flushes and compactions go on while
// the vault refuses writes (it has no hook to pause a compaction, and
// Flatten, the one public way to stop them, compacts everything itself).
// So the vault refuses writes while the free space on Badger's file
// system is under what Badger may still write by itself, without any new
// commit, from the tree as it stands (needBytes):
//
//   - the vault's own files beside Badger's, and Badger's small ones:
//     tokenvault.json and cvc-keys (rewritten whole), a rewritten MANIFEST,
//     the first pages of a new memtable log and value log, the DISCARD
//     file (fileAllowance);
//   - a memtable flush: a full memtable (MemTableSize, plus the batch that
//     overfilled it, 15% of MemTableSize) becomes a level-0 table before
//     its log is deleted (flushes run one at a time);
//   - the compactions that may run at once, each writing all its output
//     before it deletes its input: Badger runs NumCompactors of them, on
//     tables no other one holds, and the output of one is at most its
//     input (tables are not compressed; an eighth more covers tables that
//     earlier versions wrote compressed). So they write at most the sum of
//     the NumCompactors largest inputs the tree offers, and never more
//     than the whole tree:
//   - level 0's compactions: every level-0 table, the memtables not yet
//     flushed (they land in level 0 before the next one), and the base
//     level they merge into;
//   - a compaction of level i (i ≥ 1) into level i+1: one table of level
//     i and the tables of level i+1 its keys overlap, as the tree stands
//     (their key ranges), and at least what a table of the level's target
//     size would overlap with keys spread evenly, plus a table at each end;
//     several may run on one level, together never more than the data at
//     or above level i+1;
//   - the last level compacts into itself only with LmaxCompaction, which
//     the vault leaves off;
//   - an eighth more, for what the estimate leaves out (table indexes and
//     bloom filters, versions not yet dropped).
//
// It follows the tree: with the 64 MB memtable and 2 compactors
// (numCompactors), 87 MiB for an empty store (151 MiB with the read
// reserve), about 360 MiB for a store of ten gigabytes with level 0 empty
// and about 670 MiB while level 0 holds its five tables and a memtable
// waits (Badger's default of 4 compactors would make those 630 and 940).
// Writes that commit are counted as they are admitted, and the margin is
// worked out again at each reading of the free space, at most every
// nearAge; between two, each byte admitted raises it by needPerByte
// (spaceGuard). Once a second, as before, was far too seldom: a write
// load filled a small file system in about a second while the margin
// stayed what an empty store needs.

// fileAllowance is the room kept for files other than Badger's tables and
// logs.
const fileAllowance = 4 << 20

// tree is the LSM tree as far as the margin cares.
type tree struct {
	// levels holds the tables of each level; those of levels 1 and
	// deeper in key order.
	levels [][]sst
	// memtables is what the memtable logs hold: the memtables that will
	// become level-0 tables.
	memtables int64
}

// sst is one table: its size, and its first and last user keys (nil when
// the tree was read from the MANIFEST, which does not hold them).
type sst struct {
	size        int64
	left, right []byte
}

// treeOf reads the running tree.
func treeOf(db *badger.DB, levels int, dir string) tree {
	t := tree{levels: make([][]sst, levels), memtables: memtableBytes(dir)}
	for _, ti := range db.Tables() {
		if ti.Level >= 0 && ti.Level < levels {
			t.levels[ti.Level] = append(t.levels[ti.Level], sst{size: int64(ti.OnDiskSize), left: userKey(ti.Left), right: userKey(ti.Right)})
		}
	}
	for i := 1; i < levels; i++ {
		slices.SortFunc(t.levels[i], func(a, b sst) int { return bytes.Compare(a.left, b.left) })
	}
	return t
}

// treeOnDisk reads the tree of a closed store from its MANIFEST and the
// sizes of its table files, and the memtable logs it will replay. A store
// without a MANIFEST (a new one) has no tables; a MANIFEST that does not
// read is left for Badger to report, and counts as none here.
func treeOnDisk(dir string, opts badger.Options) tree {
	t := tree{levels: make([][]sst, opts.MaxLevels), memtables: memtableBytes(dir)}
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return t
	}
	defer f.Close()
	m, _, err := badger.ReplayManifestFile(f, opts.ExternalMagicVersion, opts)
	if err != nil {
		return t
	}
	for id, tm := range m.Tables {
		info, err := os.Stat(table.NewFilename(id, dir))
		if err != nil || int(tm.Level) >= len(t.levels) {
			continue
		}
		t.levels[tm.Level] = append(t.levels[tm.Level], sst{size: info.Size()})
	}
	return t
}

// userKey strips the version Badger appends to a key.
func userKey(k []byte) []byte {
	if len(k) < 8 {
		return k
	}
	return k[:len(k)-8]
}

func (t tree) levelSize(i int) int64 {
	var n int64
	for _, s := range t.levels[i] {
		n += s.size
	}
	return n
}

func (t tree) largestTable(i int) int64 {
	var n int64
	for _, s := range t.levels[i] {
		n = max(n, s.size)
	}
	return n
}

// baseLevel is the level Badger compacts level 0 into, worked out from
// the levels' sizes as Badger's levelsController.levelTargets does (v4.9):
// the deepest level whose target is within BaseLevelSize, moved down
// through empty levels, and never below a level that holds data. It also
// returns the target table size of each level.
func (t tree) baseLevel(opts badger.Options) (int, []int64) {
	last := len(t.levels) - 1
	targets := make([]int64, len(t.levels))
	base := 0
	dbSize := t.levelSize(last)
	for i := last; i > 0; i-- {
		targets[i] = max(dbSize, opts.BaseLevelSize)
		if base == 0 && targets[i] <= opts.BaseLevelSize {
			base = i
		}
		dbSize /= int64(opts.LevelSizeMultiplier)
	}
	if base == 0 {
		base = 1
	}
	for i := base; i < last; i++ {
		if t.levelSize(i) > 0 {
			break
		}
		base = i
	}
	if base < last && t.levelSize(base) == 0 && t.levelSize(base+1) < targets[base+1] && t.levelSize(base+1) < opts.BaseLevelSize {
		base++
	}
	for i := 1; i < base; i++ {
		if t.levelSize(i) > 0 {
			base = i
			break
		}
	}
	fileSz := make([]int64, len(t.levels))
	tsz := opts.BaseTableSize
	for i := range fileSz {
		switch {
		case i == 0:
			fileSz[i] = opts.MemTableSize
		case i <= base:
			fileSz[i] = tsz
		default:
			tsz *= int64(opts.TableSizeMultiplier)
			fileSz[i] = tsz
		}
	}
	return base, fileSz
}

// overlap is the size of the tables of level i whose keys overlap
// [left, right] (0 when the keys are not known).
func (t tree) overlap(i int, left, right []byte) int64 {
	if left == nil || right == nil {
		return 0
	}
	tables := t.levels[i]
	// the first table that ends at or after left; tables are in key order
	j, _ := slices.BinarySearchFunc(tables, left, func(s sst, k []byte) int {
		if s.right == nil {
			return -1
		}
		return bytes.Compare(s.right, k)
	})
	var n int64
	for ; j < len(tables) && tables[j].left != nil && bytes.Compare(tables[j].left, right) <= 0; j++ {
		n += tables[j].size
	}
	return n
}

// compactionBytes bounds what the compactions that may run at once write
// before they delete their input (see the top of this file).
func (t tree) compactionBytes(opts badger.Options, base int, fileSz []int64) int64 {
	last := len(t.levels) - 1
	whole := t.memtables
	for i := range t.levels {
		whole += t.levelSize(i)
	}
	level0 := t.levelSize(0) + t.memtables + t.levelSize(base)
	var groups []costGroup
	above := t.memtables + t.levelSize(0) // data at or above level i+1
	for i := 1; i < last; i++ {
		above += t.levelSize(i)
		next := t.levelSize(i + 1)
		if len(t.levels[i]) == 0 {
			continue
		}
		size := t.levelSize(i)
		edges := 2 * max(fileSz[i+1], t.largestTable(i+1))
		g := costGroup{limit: above + next}
		for _, s := range t.levels[i] {
			top := max(s.size, fileSz[i])
			even := top + min(next, int64(float64(next)*float64(top)/float64(size))+edges)
			g.costs = append(g.costs, max(even, s.size+t.overlap(i+1, s.left, s.right)))
		}
		slices.Sort(g.costs)
		slices.Reverse(g.costs)
		groups = append(groups, g)
	}
	n := max(opts.NumCompactors, 1)
	// compactor 0 may run level 0's compaction, or another like the rest
	bound := max(level0+largestCompactions(groups, n-1), largestCompactions(groups, n))
	return min(bound, whole)
}

// costGroup is the compactions of one level into the next: what each one
// of them would write, largest first, and what they may write together.
type costGroup struct {
	costs []int64
	limit int64
}

// largestCompactions is the most that n compactions taken from groups may
// write together.
func largestCompactions(groups []costGroup, n int) int64 {
	best := make([]int64, n+1) // best[k]: k compactions from the groups seen so far
	for _, g := range groups {
		next := slices.Clone(best)
		var sum int64
		for k := 1; k <= n && k <= len(g.costs); k++ {
			sum += g.costs[k-1]
			take := min(sum, g.limit)
			for j := k; j <= n; j++ {
				next[j] = max(next[j], best[j-k]+take)
			}
		}
		best = next
	}
	return best[n]
}

// needBytes is the free space Badger may use on its own, without a new
// commit, given its tree (see the top of this file).
func needBytes(t tree, opts badger.Options) int64 {
	flush := opts.MemTableSize + 15*opts.MemTableSize/100
	need := int64(fileAllowance) + flush
	if len(t.levels) >= 2 {
		base, fileSz := t.baseLevel(opts)
		need += t.compactionBytes(opts, base, fileSz)
	}
	return need + need/8
}

// needPerByte bounds how much needBytes grows for each byte committed
// after it was worked out: a committed byte adds to the memtables, and so
// to level 0's compaction and to the limit of each other one that may run
// at once. In eighths.
func needPerByte(opts badger.Options) int64 {
	return 9 * int64(max(opts.NumCompactors, 1))
}
