package caddymodule

import (
	"os"
	"sync"
	"testing"

	"github.com/tokenvault/tokenvault/transforms"
)

// workerEnv makes the test binary a transform worker, as "caddy vault
// transform-worker" makes the server binary one.
const workerEnv = "TOKENVAULT_TEST_TRANSFORM_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := transforms.ServeWorker(os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	workerProgram = func() ([]string, []string, error) {
		return []string{os.Args[0]}, []string{workerEnv + "=1"}, nil
	}
	code := m.Run()
	if testWorkers != nil {
		testWorkers.Close()
	}
	os.Exit(code)
}

var (
	testWorkersOnce sync.Once
	testWorkers     *transforms.Pool
	testWorkersErr  error
)

// sharedTestWorkers is one worker pool for the package's tests, whose
// workers are this test binary.
func sharedTestWorkers(tb testing.TB) *transforms.Pool {
	tb.Helper()
	testWorkersOnce.Do(func() {
		testWorkers, testWorkersErr = transforms.NewPool(transforms.Options{
			Command:    []string{os.Args[0]},
			Env:        []string{workerEnv + "=1"},
			MinWorkers: 1,
			MaxWorkers: 2,
		})
	})
	if testWorkersErr != nil {
		tb.Fatal(testWorkersErr)
	}
	return testWorkers
}
