package server

import (
	"context"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// profileShutdown writes a CPU profile of the server's shutdown to path
// (--shutdown-cpu-profile): from ctx's end (SIGTERM) until the returned
// stop, called when the server has stopped. A profile requested over HTTP
// would itself be a request the shutdown waits for. It logs how long the
// shutdown took with it, beside k8s.io/apiserver's "[graceful-termination]"
// events (-v=1).
func profileShutdown(ctx context.Context, path string) (stop func()) {
	var (
		mu      sync.Mutex
		started time.Time
		f       *os.File
		done    = make(chan struct{})
	)
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		mu.Lock()
		defer mu.Unlock()
		started = time.Now()
		var err error
		if f, err = os.Create(path); err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			klog.ErrorS(err, "Starting the shutdown CPU profile", "path", path)
			f = nil
			return
		}
		klog.InfoS("Shutdown: writing a CPU profile until exit", "path", path)
	}()
	return func() {
		close(done)
		mu.Lock()
		defer mu.Unlock()
		if f == nil {
			return
		}
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			klog.ErrorS(err, "Writing the shutdown CPU profile", "path", path)
		}
		klog.InfoS("Shutdown: server stopped", "afterSIGTERM", time.Since(started), "profile", path)
		f = nil
	}
}
