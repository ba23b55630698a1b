package badgerkv

import (
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
// an error.
//
// So the vault refuses writes while the free space on Badger's file
// system is under what Badger may still write by itself, without any new
// commit (needBytes):
//
//   - the vault's own files beside Badger's, and Badger's small ones:
//     tokenvault.json and cvc-keys (rewritten whole), a rewritten MANIFEST,
//     the first pages of a new memtable log and value log, the DISCARD
//     file (fileAllowance);
//   - a memtable flush: a full memtable (MemTableSize, plus the batch that
//     overfilled it, 15% of MemTableSize) becomes a level-0 table before
//     its log is deleted (flushes run one at a time, and each frees its
//     log before the next);
//   - the level-0 compaction: it rewrites every table of level 0 with the
//     tables of the base level they overlap (with the vault's random ids,
//     all of them), and deletes the inputs only once the outputs are
//     written;
//   - the other compactors (NumCompactors-1), each rewriting one table of
//     a level with the tables of the next level it overlaps (with keys
//     spread evenly, the table's share of its level times the next
//     level's size, plus a table at each end): the largest such
//     compactions the tree could run now;
//   - an eighth more, for what the estimate leaves out (table indexes and
//     bloom filters, versions not yet dropped).
//
// It follows the tree's shape: about 90 MB for an empty store with
// Badger's 64 MB memtable, more as level 0 fills or the lower levels grow
// (around half a gigabyte for a store of ten gigabytes). Writes that commit are
// counted as they are admitted (spaceGuard), so the margin covers only
// what Badger writes on its own.

// fileAllowance is the room kept for files other than Badger's tables and
// logs.
const fileAllowance = 4 << 20

// shape is the LSM tree as far as the margin cares: the sizes of the
// tables of each level.
type shape [][]int64

// shapeOf reads the running tree's shape.
func shapeOf(db *badger.DB, levels int) shape {
	s := make(shape, levels)
	for _, t := range db.Tables() {
		if t.Level >= 0 && t.Level < levels {
			s[t.Level] = append(s[t.Level], int64(t.OnDiskSize))
		}
	}
	return s
}

// shapeOnDisk reads the shape of a closed store from its MANIFEST and the
// sizes of its table files. A store without a MANIFEST (a new one) is
// empty; a MANIFEST that does not read is left for Badger to report, and
// counts as empty here.
func shapeOnDisk(dir string, opts badger.Options) shape {
	s := make(shape, opts.MaxLevels)
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return s
	}
	defer f.Close()
	m, _, err := badger.ReplayManifestFile(f, opts.ExternalMagicVersion, opts)
	if err != nil {
		return s
	}
	for id, t := range m.Tables {
		info, err := os.Stat(table.NewFilename(id, dir))
		if err != nil || int(t.Level) >= len(s) {
			continue
		}
		s[t.Level] = append(s[t.Level], info.Size())
	}
	return s
}

func (s shape) levelSize(i int) int64 {
	var n int64
	for _, sz := range s[i] {
		n += sz
	}
	return n
}

func (s shape) largestTable(i int) int64 {
	var n int64
	for _, sz := range s[i] {
		n = max(n, sz)
	}
	return n
}

// baseLevel is the level Badger compacts level 0 into, worked out from
// the levels' sizes as Badger's levelsController.levelTargets does (v4.9):
// the deepest level whose target is within BaseLevelSize, moved down
// through empty levels, and never below a level that holds data. It also
// returns the target table size of each level.
func (s shape) baseLevel(opts badger.Options) (int, []int64) {
	last := len(s) - 1
	targets := make([]int64, len(s))
	base := 0
	dbSize := s.levelSize(last)
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
		if s.levelSize(i) > 0 {
			break
		}
		base = i
	}
	if base < last && s.levelSize(base) == 0 && s.levelSize(base+1) < targets[base+1] && s.levelSize(base+1) < opts.BaseLevelSize {
		base++
	}
	for i := 1; i < base; i++ {
		if s.levelSize(i) > 0 {
			base = i
			break
		}
	}
	fileSz := make([]int64, len(s))
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

// needBytes is the free space Badger may use on its own, without a new
// commit, given the tree's shape (see the top of this file).
func needBytes(s shape, opts badger.Options) int64 {
	if len(s) < 2 {
		return fileAllowance
	}
	base, fileSz := s.baseLevel(opts)
	tableAt := func(i int) int64 { return max(fileSz[i], s.largestTable(i)) }
	flush := opts.MemTableSize + 15*opts.MemTableSize/100
	need := int64(fileAllowance) + flush + s.levelSize(0) + s.levelSize(base)
	last := len(s) - 1
	var costs []int64
	for i := base; i <= last; i++ {
		if s.levelSize(i) == 0 {
			continue
		}
		if i == last { // the last level compacts into itself to drop stale versions
			costs = append(costs, 2*tableAt(i))
			continue
		}
		top, next := tableAt(i), s.levelSize(i+1)
		overlap := min(next, int64(float64(next)*float64(top)/float64(s.levelSize(i))))
		costs = append(costs, top+overlap+2*tableAt(i+1))
	}
	slices.Sort(costs)
	slices.Reverse(costs)
	for i := 0; i < len(costs) && i < max(opts.NumCompactors-1, 1); i++ {
		need += costs[i]
	}
	return need + need/8
}
