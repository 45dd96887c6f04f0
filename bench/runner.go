package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// runner gives the test helpers (framework, harness, netns) what they need from
// testing.TB outside `go test`: cleanups run newest first by teardown, Fatal aborts the
// benchmark through a panic that runBench recovers, logs go to stderr.
type runner struct {
	testing.TB // never called; satisfies the interface's unexported method

	name     string
	mu       sync.Mutex
	cleanups []func()
	dir      string
	tmp      int
	failed   bool
	torn     bool
}

// fatal is the panic value of Fatal.
type fatal struct{ msg string }

func newRunner(name string) (*runner, error) {
	dir, err := os.MkdirTemp("", "juneau-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	return &runner{name: name, dir: dir}, nil
}

func (r *runner) Helper()      {}
func (r *runner) Name() string { return "bench-" + r.name }
func (r *runner) Failed() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }

func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *runner) TempDir() string {
	r.mu.Lock()
	r.tmp++
	dir := filepath.Join(r.dir, fmt.Sprintf("%03d", r.tmp))
	r.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Fatalf("temp dir: %v", err)
	}
	return dir
}

func (r *runner) Log(args ...any) { r.Logf("%s", fmt.Sprint(args...)) }
func (r *runner) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] "+format+"\n", append([]any{r.name}, args...)...)
}
func (r *runner) Error(args ...any) { r.setFailed(); r.Log(args...) }
func (r *runner) Errorf(format string, args ...any) {
	r.setFailed()
	r.Logf(format, args...)
}
func (r *runner) Fatal(args ...any) { r.setFailed(); panic(fatal{fmt.Sprint(args...)}) }
func (r *runner) Fatalf(format string, args ...any) {
	r.setFailed()
	panic(fatal{fmt.Sprintf(format, args...)})
}
func (r *runner) FailNow()                         { r.Fatal("failed") }
func (r *runner) Fail()                            { r.setFailed() }
func (r *runner) Skip(args ...any)                 { r.Fatal(args...) }
func (r *runner) Skipf(format string, args ...any) { r.Fatalf(format, args...) }
func (r *runner) SkipNow()                         { r.Fatal("skipped") }
func (r *runner) Skipped() bool                    { return false }

func (r *runner) setFailed() { r.mu.Lock(); r.failed = true; r.mu.Unlock() }

// teardown runs every cleanup once, newest first, then removes the temp dir. A cleanup
// that panics does not stop the others.
func (r *runner) teardown() {
	r.mu.Lock()
	if r.torn {
		r.mu.Unlock()
		return
	}
	r.torn = true
	cleanups := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		func() {
			defer func() { _ = recover() }()
			cleanups[i]()
		}()
	}
	_ = os.RemoveAll(r.dir)
}
