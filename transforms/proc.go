package transforms

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// proc is the parent's handle on one worker process.
type proc struct {
	cmd    *exec.Cmd
	pid    int
	in     *frameWriter
	stdin  *os.File
	frames chan *frame   // frames from the worker; closed when its stdout ends
	exited chan struct{} // closed once the process has been waited for
	stderr *tailBuffer
	limit  int64 // memory cap, for messages
	// unconfined is why the worker runs without its system call filter
	// (from its ready frame); empty when it has it.
	unconfined string

	killedFor atomic.Pointer[string] // why the pool killed it, if it did
	state     *os.ProcessState       // set before exited is closed
	lastUsed  time.Time              // guarded by the pool's mutex

	// Dispatch (guarded by the pool's mutex): busySince is when the
	// current run's job frame was sent (zero while idle, or before the
	// frame is sent); next is the job frame queued behind it, if any;
	// holder is the ticket whose run the worker is given to (nil while
	// idle or draining), whose tenant holds it (fairqueue.go).
	busySince time.Time
	next      *queued
	holder    *ticket

	// Realm affinity. slot is fixed at start; warm mirrors the worker's
	// cache of warm realms, by affinity hash (guarded by the pool's
	// mutex); kept and ranWarm are what the last result said (owned by
	// the run).
	slot          int
	warm          *lru[uint64, struct{}]
	kept, ranWarm bool
}

// startProc starts a worker with spawn (which runs cmd.Start on the
// pool's locked thread), sends it its configuration and waits for it to
// be ready. done is called once the process has ended, or at once when
// it could not be started.
func startProc(o *Options, spawn func(*exec.Cmd) error, done func()) (*proc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		done()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		done()
		return nil, err
	}
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Env = o.Env
	cmd.Dir = "/"
	cmd.Stdin = inR
	cmd.Stdout = outW
	p := &proc{
		cmd: cmd, stdin: inW, in: &frameWriter{w: inW}, limit: o.MemoryLimit,
		frames: make(chan *frame, 256), exited: make(chan struct{}), stderr: &tailBuffer{max: 8 << 10},
	}
	cmd.Stderr = p.stderr
	cmd.SysProcAttr = workerSysProcAttr()
	err = spawn(cmd)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		done()
		return nil, fmt.Errorf("transforms: start worker: %w", err)
	}
	p.pid = cmd.Process.Pid
	go p.readLoop(outR)
	go func() {
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		inW.Close()
		close(p.exited)
		done()
	}()

	init := &initConfig{
		MemoryLimit: o.MemoryLimit, MaxCallStackSize: o.MaxCallStackSize,
		ModulesDir: o.ModulesDir, AllowModules: o.AllowModules,
		MaxLogLines: o.MaxLogLines, MaxSvcCalls: o.MaxSvcCalls,
	}
	if err := p.in.write(&frame{T: frameInit, Init: init}); err != nil {
		p.kill(KindCrash)
		return nil, fmt.Errorf("transforms: start worker: %w", err)
	}
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case f, ok := <-p.frames:
		if ok && f.T == frameReady {
			p.unconfined = f.Unconfined
			return p, nil
		}
		p.kill(KindCrash)
		<-p.exited
		// No tenant code has run yet: its stderr is the worker's own.
		return nil, fmt.Errorf("transforms: worker did not start (%s): %s", p.exitSummary(), lastLine(p.stderr.String()))
	case <-timer.C:
		p.kill(KindCrash)
		return nil, errors.New("transforms: worker did not start in time")
	}
}

// readLoop reads the worker's frames until its stdout ends. A frame that
// breaks the protocol gets the worker killed.
func (p *proc) readLoop(r io.ReadCloser) {
	defer r.Close()
	defer close(p.frames)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		f, err := readFrame(br, maxFrameFromWorker)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.kill(KindCrash)
			}
			return
		}
		p.frames <- f
	}
}

// kill kills the worker, remembering the first cause given.
func (p *proc) kill(cause string) {
	p.killedFor.CompareAndSwap(nil, &cause)
	_ = p.cmd.Process.Kill()
}

// stop asks the worker to exit by closing its stdin, and kills it if it
// has not within a second.
func (p *proc) stop(cause string) {
	p.killedFor.CompareAndSwap(nil, &cause)
	_ = p.stdin.Close()
	go func() {
		select {
		case <-p.exited:
		case <-time.After(time.Second):
			_ = p.cmd.Process.Kill()
		}
	}()
}

// alive reports whether the process has not exited yet.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// cause returns why the pool killed the worker, or "".
func (p *proc) cause() string {
	if c := p.killedFor.Load(); c != nil {
		return *c
	}
	return ""
}

// exitError maps how a worker ended to an *Error. Call after exited.
//
//	killed by the pool at the deadline       -> KindTimeout
//	exit status 3 (the memory watchdog)      -> KindMemory
//	Go "fatal error" about memory or stacks  -> KindMemory
//	  ("out of memory", "cannot allocate memory", "stack overflow",
//	   "stack exceeds", "failed to create new OS thread"; in binaries
//	   built with -race, exit status 66 and the race runtime's words for a
//	   failed mmap: "address space collisions", "ThreadSanitizer failed to
//	   allocate")
//	SIGKILL the pool did not send            -> KindMemory (the OOM killer)
//	anything else                            -> KindCrash
func (p *proc) exitError() *Error {
	switch p.cause() {
	case KindTimeout:
		return newError(KindTimeout, "the code did not stop within the deadline and its worker was killed")
	case KindClosed:
		return newError(KindClosed, "the pool was closed")
	}
	code := -1
	var sig syscall.Signal = -1
	if p.state != nil {
		code = p.state.ExitCode()
		if ws, ok := p.state.Sys().(interface {
			Signaled() bool
			Signal() syscall.Signal
		}); ok && ws.Signaled() {
			sig = ws.Signal()
		}
	}
	tail := p.stderr.String()
	switch {
	case code == exitMemory:
		return newError(KindMemory, "the code used more than the %d MiB memory limit", p.limit>>20)
	case (code == 2 || code == 66) && containsAny(tail, "out of memory", "cannot allocate memory", "stack overflow",
		"stack exceeds", "failed to create new OS thread", "address space collisions", "ThreadSanitizer failed to allocate"):
		return newError(KindMemory, "the code exhausted the worker's memory (%s)", goFatal(tail))
	case sig == syscall.SIGKILL && p.cause() == "":
		return newError(KindMemory, "the worker was killed by the system, most likely for using too much memory")
	}
	return newError(KindCrash, "the transform worker died (%s)", p.exitSummary())
}

// exitSummary describes how the process ended, without its output.
func (p *proc) exitSummary() string {
	if p.state == nil {
		return "still running"
	}
	if f := goFatal(p.stderr.String()); f != "" {
		return p.state.String() + ", " + f
	}
	return p.state.String()
}

// goFatal extracts the Go runtime's "fatal error: ..." or "panic: ..."
// line from a worker's stderr. Those lines come from the Go runtime, not
// from tenant data: a panic value could, so only its first 60 bytes are
// kept.
func goFatal(tail string) string {
	for _, line := range strings.Split(tail, "\n") {
		if strings.HasPrefix(line, "fatal error: ") {
			return truncate(line, 80)
		}
	}
	for _, line := range strings.Split(tail, "\n") {
		if strings.HasPrefix(line, "panic: ") {
			return truncate(line, 60)
		}
	}
	return ""
}

// lastLine returns the last non-empty line of s, cut to 300 bytes.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return truncate(strings.TrimSpace(lines[len(lines)-1]), 300)
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// tailBuffer keeps the first and the last bytes written to it: a worker's
// stderr, read to classify its death.
type tailBuffer struct {
	mu   sync.Mutex
	max  int
	head []byte
	tail []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	if room := t.max/2 - len(t.head); room > 0 {
		take := min(room, len(b))
		t.head = append(t.head, b[:take]...)
		b = b[take:]
	}
	t.tail = append(t.tail, b...)
	if over := len(t.tail) - t.max/2; over > 0 {
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.head) + "\n" + string(t.tail)
}
