// Package runner runs the test helpers outside `go test`, for the sandbox and the
// benchmarks.
package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Runner gives the test helpers (framework, harness, netns) what they need from
// testing.TB outside `go test` (the sandbox, the benchmarks): cleanups run newest first
// by Teardown, Fatal aborts through a panic of type Abort that the caller recovers, logs
// go to stderr.
type Runner struct {
	testing.TB // never called; satisfies the interface's unexported method

	name     string
	mu       sync.Mutex
	cleanups []func()
	dir      string
	tmp      int
	failed   bool
	// teardown runs the cleanups once; a second caller (the benchmark's own end while
	// Ctrl-C's teardown runs) waits for it, so the process exits only once everything
	// is removed.
	teardown sync.Once
}

// Abort is the panic value of Fatal and Fatalf.
type Abort struct{ Msg string }

// New makes a runner whose logs are prefixed with name and whose temp dirs live under
// one directory removed by Teardown.
func New(name string) (*Runner, error) {
	dir, err := os.MkdirTemp("", "juneau-"+name+"-")
	if err != nil {
		return nil, err
	}
	return &Runner{name: name, dir: dir}, nil
}

func (r *Runner) Helper()      {}
func (r *Runner) Name() string { return r.name }
func (r *Runner) Failed() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }

func (r *Runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *Runner) TempDir() string {
	r.mu.Lock()
	r.tmp++
	dir := filepath.Join(r.dir, fmt.Sprintf("%03d", r.tmp))
	r.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Fatalf("temp dir: %v", err)
	}
	return dir
}

func (r *Runner) Log(args ...any) { r.Logf("%s", fmt.Sprint(args...)) }
func (r *Runner) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] "+format+"\n", append([]any{r.name}, args...)...)
}
func (r *Runner) Error(args ...any) { r.setFailed(); r.Log(args...) }
func (r *Runner) Errorf(format string, args ...any) {
	r.setFailed()
	r.Logf(format, args...)
}
func (r *Runner) Fatal(args ...any) { r.setFailed(); panic(Abort{fmt.Sprint(args...)}) }
func (r *Runner) Fatalf(format string, args ...any) {
	r.setFailed()
	panic(Abort{fmt.Sprintf(format, args...)})
}
func (r *Runner) FailNow()                         { r.Fatal("failed") }
func (r *Runner) Fail()                            { r.setFailed() }
func (r *Runner) Skip(args ...any)                 { r.Fatal(args...) }
func (r *Runner) Skipf(format string, args ...any) { r.Fatalf(format, args...) }
func (r *Runner) SkipNow()                         { r.Fatal("skipped") }
func (r *Runner) Skipped() bool                    { return false }

func (r *Runner) setFailed() { r.mu.Lock(); r.failed = true; r.mu.Unlock() }

// Teardown runs every cleanup once, newest first, then removes the temp dir. A cleanup
// that panics does not stop the others.
func (r *Runner) Teardown() {
	r.teardown.Do(func() {
		r.mu.Lock()
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
	})
}
