//go:build juneau_bench_pprof

// This file is not built into juneau. The benchmark driver (bench -cpuprofile) compiles
// it into a separate juneau binary with `go build -overlay` and the tag
// juneau_bench_pprof, so that it can profile the controller exactly while a benchmark
// works, without a profiling endpoint in the product.

package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
)

// benchPprofDirEnv names the directory where the process writes the loopback address
// of its profiling endpoint, in a file named after its pid.
const benchPprofDirEnv = "JUNEAU_BENCH_PPROF_DIR"

// benchPprofCPUEnv names a file: a process started with it set profiles its CPU from
// its start (a restart's cache sync included) until POST /cpu/stop.
const benchPprofCPUEnv = "JUNEAU_BENCH_PPROF_CPU"

func init() {
	dir := os.Getenv(benchPprofDirEnv)
	if dir == "" {
		return
	}
	// Sample the heap finely enough that a cache of a few thousand objects shows by
	// type (the default samples every 512 KiB).
	runtime.MemProfileRate = 4096
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	p := &benchProfiler{}
	if file := os.Getenv(benchPprofCPUEnv); file != "" {
		if f, err := os.Create(file); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				p.file = f
			} else {
				f.Close()
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /cpu/start", p.start)
	mux.HandleFunc("POST /cpu/stop", p.stop)
	mux.HandleFunc("POST /heap", heap)
	go func() { _ = http.Serve(l, mux) }()
	_ = os.WriteFile(filepath.Join(dir, strconv.Itoa(os.Getpid())), []byte(l.Addr().String()), 0o644)
}

// benchProfiler starts and stops one CPU profile at a time, written to the file the
// driver names.
type benchProfiler struct {
	mu   sync.Mutex
	file *os.File
}

func (p *benchProfiler) start(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.file != nil {
		http.Error(w, "a profile is running", http.StatusConflict)
		return
	}
	f, err := os.Create(r.URL.Query().Get("file"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p.file = f
}

func (p *benchProfiler) stop(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.file == nil {
		http.Error(w, "no profile is running", http.StatusConflict)
		return
	}
	pprof.StopCPUProfile()
	err := p.file.Close()
	p.file = nil
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// heap writes a heap profile (live objects after a collection) to the file the driver
// names, and beside it, in <file>.txt, the same profile as text, which ends with the
// runtime's memory statistics (heap in use, idle and released, stacks, metadata): what
// the resident set holds besides live objects.
func heap(w http.ResponseWriter, r *http.Request) {
	file := r.URL.Query().Get("file")
	runtime.GC()
	for _, out := range []struct {
		name  string
		debug int
	}{{file, 0}, {file + ".txt", 1}} {
		if err := writeHeap(out.name, out.debug); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
}

func writeHeap(name string, debug int) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	err = pprof.Lookup("heap").WriteTo(f, debug)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
