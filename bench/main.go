package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Params size every section. fullParams is the reference run, quickParams
// the development run (about 3 minutes), tinyParams the test's.
type Params struct {
	Mode       string
	Append     AppendParams
	Get        GetParams
	Lag        LagParams
	ReplayReps int
	Turn       TurnParams
	Mem        MemParams
	// Scale is the memory section at a million threads, Soak the long
	// steady run; neither is in the default sections.
	Scale   MemParams
	Soak    SoakParams
	Cluster ClusterParams
}

func fullParams() Params {
	return Params{
		Mode:   "full",
		Append: AppendParams{Rounds: 5, SeqOps: 400, Warmup: 50, Writers: 32, Threads: 1000, ConcFor: 3 * time.Second, ConcSlice: 500 * time.Millisecond},
		Get: GetParams{Sizes: []int{100, 1_000, 10_000, 100_000}, Content: 512, NextEvent: 60, CollectFrom: 10_000, Rounds: 5,
			Iters: func(n int) int { return min(300, max(7, 300_000/n)) }},
		Lag:        LagParams{Rates: []int{1_000, 5_000}, For: 16 * time.Second, Rounds: 16, RoundsAt: map[int]int{5_000: 32}, Warmup: 500 * time.Millisecond, Threads: 1_000, Content: 512, Backlog: 300_000, SplitRates: []int{5_000}},
		ReplayReps: 3,
		Turn:       TurnParams{Samples: 100, PerThread: 10},
		Mem:        MemParams{Threads: 100_000, Messages: 20, Content: 256, WorkerTurns: 5_000},
		Scale:      MemParams{Threads: 1_000_000, Messages: 20, Content: 64, WorkerTurns: 5_000, Reads: 100_000},
		Soak:       SoakParams{For: 30 * time.Minute, Rate: 1_000, Threads: 1_000, Content: 256, Every: time.Minute, ReadsPerSec: 50},
		Cluster: ClusterParams{Append: AppendParams{Rounds: 3, SeqOps: 300, Warmup: 50, Writers: 32, Threads: 1000, ConcFor: 3 * time.Second},
			Kills: 3, KillLoad: 15 * time.Second, Partitions: 3},
	}
}

func quickParams() Params {
	return Params{
		Mode:   "quick",
		Append: AppendParams{Rounds: 9, SeqOps: 200, Warmup: 20, Writers: 32, Threads: 1000, ConcFor: 600 * time.Millisecond, ConcSlice: 200 * time.Millisecond},
		Get: GetParams{Sizes: []int{100, 1_000, 10_000}, Content: 512, NextEvent: 8, CollectFrom: 10_000, Rounds: 9,
			Iters: func(n int) int {
				if n <= 1_000 {
					return 396 // the ratio rows: 9 rounds of 44
				}
				return max(5, 50_000/n)
			}},
		Lag:        LagParams{Rates: []int{1_000, 5_000}, For: 4 * time.Second, Rounds: 4, RoundsAt: map[int]int{5_000: 16}, Warmup: 150 * time.Millisecond, Threads: 1_000, Content: 512, Backlog: 5_000, SplitRates: []int{5_000}},
		ReplayReps: 9, // the replay of 10,000 events takes about 0.1 s: one burst of load moves a run
		Turn:       TurnParams{Samples: 20, PerThread: 10},
		Mem:        MemParams{Threads: 10_000, Messages: 20, Content: 256, WorkerTurns: 500},
		Scale:      MemParams{Threads: 100_000, Messages: 20, Content: 64, WorkerTurns: 500, Reads: 10_000},
		Soak:       SoakParams{For: time.Minute, Rate: 1_000, Threads: 1_000, Content: 256, Every: 10 * time.Second, ReadsPerSec: 50},
		Cluster: ClusterParams{Append: AppendParams{Rounds: 2, SeqOps: 100, Warmup: 20, Writers: 32, Threads: 200, ConcFor: time.Second},
			Kills: 1, KillLoad: 12 * time.Second, Partitions: 3},
	}
}

func tinyParams() Params {
	return Params{
		Mode:   "tiny",
		Append: AppendParams{Rounds: 1, SeqOps: 10, Warmup: 2, Writers: 4, Threads: 8, ConcFor: 200 * time.Millisecond, ConcSlice: 100 * time.Millisecond},
		Get: GetParams{Sizes: []int{10, 1_200}, Content: 512, NextEvent: 2, CollectFrom: 1_000, Rounds: 2,
			Iters: func(int) int { return 2 }},
		Lag:        LagParams{Rates: []int{200}, For: 500 * time.Millisecond, Rounds: 1, Warmup: 100 * time.Millisecond, Threads: 20, Content: 64, Backlog: 200, SplitRates: []int{200}},
		ReplayReps: 1,
		Turn:       TurnParams{Samples: 2, PerThread: 2},
		Mem:        MemParams{Threads: 20, Messages: 4, Content: 64, WorkerTurns: 5, Reads: 10},
		Scale:      MemParams{Threads: 30, Messages: 4, Content: 64, WorkerTurns: 5, Reads: 10},
		Soak:       SoakParams{For: 3 * time.Second, Rate: 200, Threads: 10, Content: 64, Every: time.Second, ReadsPerSec: 20},
		Cluster: ClusterParams{Append: AppendParams{Rounds: 1, SeqOps: 10, Warmup: 2, Writers: 4, Threads: 8, ConcFor: 200 * time.Millisecond},
			Kills: 1, KillLoad: 9 * time.Second, Partitions: 3},
	}
}

// Sections, in run order. defaultSections leaves out the long ones (scale:
// a million threads, about 20 minutes; soak: 30 minutes), which are run on
// their own and merged into the report (-merge).
var (
	allSections     = []string{"append", "get", "replay", "lag", "turn", "memory", "scale", "soak", "cluster"}
	defaultSections = []string{"append", "get", "replay", "lag", "turn", "memory", "cluster"}
)

// RunConfig is one run.
type RunConfig struct {
	Params
	// PG is a Postgres DSN and Redis a host:port; empty skips them.
	PG, Redis string
	// Dir is where the servers keep their data (a temp dir is made in it).
	Dir string
	// NATSServer is a nats-server binary for the cluster section ("":
	// the section is skipped).
	NATSServer string
	Sections   []string
	Log        func(format string, args ...any)
}

// Results is everything one run measured.
type Results struct {
	Mode    string
	Command string
	Machine Machine
	Took    time.Duration
	// Load is the load average at the start of each section, and at the end.
	Load    [][2]string
	Append  *AppendResults
	Get     *GetResults
	Lag     *LagResults
	Replay  *ReplayResults
	Turn    *TurnResults
	Memory  *MemResults
	Scale   *MemResults
	Soak    *SoakResults
	Cluster *ClusterResults
	// Merged says where the sections taken from another run's JSON
	// (-merge) come from: their command and date.
	Merged     string `json:",omitempty"`
	Baseline   struct{ PG, Redis bool }
	RedisFsync string

	// Params are the sizes the run used.
	Params Params

	chartPath string
}

// Run runs the sections of cfg.
func Run(ctx context.Context, cfg RunConfig) (*Results, error) {
	start := time.Now()
	log := cfg.Log
	if log == nil {
		log = func(string, ...any) {}
	}
	want := func(s string) bool {
		return len(cfg.Sections) == 0 && slices.Contains(defaultSections, s) || slices.Contains(cfg.Sections, s)
	}
	res := &Results{Mode: cfg.Mode, Machine: describeMachine(), Params: cfg.Params}
	mark := func(section string) { res.Load = append(res.Load, [2]string{section, loadAvg()}) }
	dir, err := os.MkdirTemp(cfg.Dir, "convlog-bench-")
	if err != nil {
		return nil, err
	}
	defer removeAll(dir)

	b, err := ConnectBaselines(ctx, cfg.PG, cfg.Redis, cfg.Append.Writers+8)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	res.Machine.Postgres, res.Machine.Redis, res.RedisFsync = b.PGVersion, b.RedisVersion, b.RedisFsync
	res.Baseline.PG, res.Baseline.Redis = b.PG != nil, b.Redis != nil

	if want("append") || want("get") || want("lag") || want("replay") || want("turn") {
		e, err := StartEnv(ctx, filepath.Join(dir, "convlog"))
		if err != nil {
			return nil, err
		}
		defer e.Close()
		res.Machine.NATSServer = e.serverVersion()
		if want("append") {
			mark("append")
			if res.Append, err = RunAppend(ctx, e, b, cfg.Append, log); err != nil {
				return nil, fmt.Errorf("append: %w", err)
			}
		}
		if err := e.DropAppendResources(ctx); err != nil {
			return nil, err
		}
		if err := e.StartProjector(ctx); err != nil {
			return nil, err
		}
		log("waiting for the projector to catch up")
		if err := e.WaitProjected(ctx); err != nil {
			return nil, err
		}
		if want("get") || want("replay") {
			mark("get")
			gp := cfg.Get
			if !want("get") { // replay alone: only the longest thread
				gp.Sizes, gp.NextEvent = gp.Sizes[len(gp.Sizes)-1:], 0
			}
			g, err := RunGet(ctx, e, b, gp, log)
			if err != nil {
				return nil, fmt.Errorf("get: %w", err)
			}
			if want("get") {
				res.Get = g
			}
			if want("replay") {
				mark("replay")
				if res.Replay, err = RunReplay(ctx, e, b, g.longest, cfg.ReplayReps, log); err != nil {
					return nil, fmt.Errorf("replay: %w", err)
				}
			}
			// The longest thread's raw log (100,000 messages with their
			// headers in full mode, hundreds of MB) is the replay's input
			// only: res.Get keeps g, and the live heap the later sections'
			// collections mark would otherwise include it.
			g.longest = nil
		}
		if want("lag") {
			mark("lag")
			if res.Lag, err = RunLag(ctx, e, cfg.Lag, log); err != nil {
				return nil, fmt.Errorf("lag: %w", err)
			}
		}
		if want("turn") {
			mark("turn")
			if res.Turn, err = RunTurn(ctx, e, cfg.Turn, log); err != nil {
				return nil, fmt.Errorf("turn: %w", err)
			}
		}
		e.Close()
	}
	if want("memory") {
		mark("memory")
		if res.Memory, err = RunMemory(ctx, dir, cfg.Mem, log); err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
	}
	if want("scale") {
		mark("scale")
		if res.Scale, err = RunMemory(ctx, dir, cfg.Scale, log); err != nil {
			return nil, fmt.Errorf("scale: %w", err)
		}
	}
	if want("soak") {
		mark("soak")
		if res.Soak, err = RunSoak(ctx, dir, cfg.Soak, log); err != nil {
			return nil, fmt.Errorf("soak: %w", err)
		}
	}
	if want("cluster") && cfg.NATSServer != "" {
		mark("cluster")
		if res.Cluster, err = RunCluster(ctx, cfg.NATSServer, filepath.Join(dir, "cluster"), cfg.Cluster, log); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	mark("end")
	res.Took = time.Since(start)
	return res, nil
}

func main() {
	if isChild() {
		os.Exit(childMain())
	}
	os.Exit(benchMain())
}

// toRepoRoot changes to the repository root when the bench was started in
// bench/ (as `go run -C bench .` and bench/run.sh do: bench is a module of
// its own), so that its paths (-out, -png, -notes) are relative to the
// root wherever it runs from.
func toRepoRoot() {
	wd, err := os.Getwd()
	if err != nil || filepath.Base(wd) != "bench" {
		return
	}
	if _, err := os.Stat(filepath.Join(wd, "..", "BENCHMARKS.md")); err == nil {
		_ = os.Chdir("..")
	}
}

// benchMain is main without os.Exit, so that deferred calls run.
func benchMain() int {
	toRepoRoot()
	var (
		quick    = flag.Bool("quick", false, "development run: smaller sizes, about 3 minutes")
		out      = flag.String("out", "BENCHMARKS.md", "markdown report to write (empty: stdout only; -quick: empty unless set)")
		png      = flag.String("png", "bench/get_latency.png", "Get latency chart to write (empty: none; -quick: empty unless set)")
		pg       = flag.String("pg", "", "Postgres DSN of the baseline (empty: no Postgres)")
		rds      = flag.String("redis", "", "Redis host:port of the baseline (empty: no Redis)")
		dir      = flag.String("dir", "", "directory for the servers' data (default: the system temp dir)")
		sections = flag.String("sections", strings.Join(defaultSections, ","), "sections to run, of "+strings.Join(allSections, ","))
		merge    = flag.String("merge", "", "a -json file of an earlier run whose sections this run did not measure are added to the report (the scale and soak sections, run on their own)")
		command  = flag.String("cmd", "", "the command line to print as the way to reproduce (run.sh sets it)")
		profile  = flag.String("profile", "", "directory to write CPU and allocation profiles to (bench.cpu.pprof and bench.allocs.pprof, and one of each per memory-section child), each child's heap profile at every memory sample (<role>.heap.<n>.pprof), and this process's heap and goroutines at the lag section's start (lag.heap.pprof, lag.goroutine.pprof)")
		jsonOut  = flag.String("json", "", "also write the raw results as JSON to this file")
		from     = flag.String("from", "", "render the report and chart from a -json file instead of measuring")
		notes    = flag.String("notes", "bench/NOTES.md", "hand-written analysis appended to the report when the file exists")
		soakFor  = flag.Duration("soak-for", 0, "how long the soak section publishes (0: 30m, 1m with -quick)")
		natsBin  = flag.String("nats-server", "", "nats-server binary for the cluster section (3 processes, replicas 3); empty: the section is skipped (run.sh builds one)")
	)
	flag.Parse()
	p := fullParams()
	if *quick {
		p = quickParams()
		// A development run does not overwrite the committed report
		// unless asked to.
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["out"] {
			*out = ""
		}
		if !set["png"] {
			*png = ""
		}
	}
	if *soakFor > 0 {
		p.Soak.For = *soakFor
	}
	var secs []string
	for s := range strings.SplitSeq(*sections, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if !slices.Contains(allSections, s) {
				fmt.Fprintf(os.Stderr, "bench: unknown section %q (have %s)\n", s, strings.Join(allSections, ","))
				return 2
			}
			secs = append(secs, s)
		}
	}
	if *profile != "" {
		if err := os.MkdirAll(*profile, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 1
		}
		os.Setenv(profileEnv, *profile)
		stopProfile, err := startCPUProfile(filepath.Join(*profile, "bench.cpu.pprof"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 1
		}
		defer stopProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t0 := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
	}
	var res *Results
	if *from != "" {
		b, err := os.ReadFile(*from)
		if err == nil {
			err = json.Unmarshal(b, &res)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -from: %v\n", err)
			return 1
		}
	} else {
		var err error
		if res, err = Run(ctx, RunConfig{Params: p, PG: *pg, Redis: *rds, Dir: *dir, Sections: secs, Log: logf, NATSServer: *natsBin}); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 1
		}
		res.Command = *command
		if res.Command == "" {
			res.Command = "go run -C bench . " + strings.Join(os.Args[1:], " ")
		}
	}
	if *merge != "" {
		if err := mergeFrom(res, *merge); err != nil {
			fmt.Fprintf(os.Stderr, "bench: -merge: %v\n", err)
			return 1
		}
	}
	if *jsonOut != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			err = os.WriteFile(*jsonOut, b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -json: %v\n", err)
			return 1
		}
	}
	if *png != "" && res.Get != nil {
		if err := writeChart(*png, res); err != nil {
			fmt.Fprintf(os.Stderr, "bench: chart: %v\n", err)
			return 1
		}
		res.chartPath = *png
	}
	md := Markdown(res, *out, *notes)
	fmt.Print(md)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(md), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 1
		}
		logf("wrote %s", *out)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return 130
	}
	return 0
}

// mergeFrom fills the sections res did not measure from the results in the
// -json file path, and records where they came from in res.Merged.
func mergeFrom(res *Results, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var old Results
	if err := json.Unmarshal(b, &old); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var took []string
	take := func(name string, have bool, set func()) {
		if !have {
			set()
			took = append(took, name)
		}
	}
	take("append", res.Append != nil || old.Append == nil, func() { res.Append = old.Append })
	take("get", res.Get != nil || old.Get == nil, func() { res.Get = old.Get })
	take("lag", res.Lag != nil || old.Lag == nil, func() { res.Lag = old.Lag })
	take("replay", res.Replay != nil || old.Replay == nil, func() { res.Replay = old.Replay })
	take("turn", res.Turn != nil || old.Turn == nil, func() { res.Turn = old.Turn })
	take("memory", res.Memory != nil || old.Memory == nil, func() { res.Memory = old.Memory })
	take("scale", res.Scale != nil || old.Scale == nil, func() { res.Scale = old.Scale })
	take("soak", res.Soak != nil || old.Soak == nil, func() { res.Soak = old.Soak })
	take("cluster", res.Cluster != nil || old.Cluster == nil, func() { res.Cluster = old.Cluster })
	if len(took) > 0 {
		res.Merged = fmt.Sprintf("sections %s from `%s` (%s mode) of %s", strings.Join(took, ", "), old.Command, old.Mode, old.Machine.Date.Format(time.RFC3339))
	}
	return nil
}
