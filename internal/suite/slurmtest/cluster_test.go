package slurmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The programs a cluster needs, and the Debian packages they come in.
var programs = []struct{ name, pkg string }{
	{"munged", "munge"}, {"munge", "munge"},
	{"slurmctld", "slurmctld"}, {"slurmd", "slurmd"},
	{"sbatch", "slurm-client"}, {"scancel", "slurm-client"}, {"scontrol", "slurm-client"}, {"squeue", "slurm-client"}, {"sinfo", "slurm-client"},
}

// cluster is a one-node Slurm cluster on localhost, all of whose files
// are under dir.
type cluster struct {
	dir  string
	conf string // slurm.conf; every process of the cluster has SLURM_CONF=conf
	node string
	// env is what a client command, and every job, runs with.
	env     []string
	daemons []*daemon
}

type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
}

// startCluster starts munged, slurmctld and slurmd with a configuration of
// their own and stops them when the test ends, with every job and process
// of the cluster; it skips, naming what is missing, where the packages are
// not installed or the test is not root.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("a Slurm cluster on localhost needs Linux")
	}
	var missing, pkgs []string
	for _, p := range programs {
		if _, err := exec.LookPath(p.name); err != nil {
			missing = append(missing, p.name)
			if !slices.Contains(pkgs, p.pkg) {
				pkgs = append(pkgs, p.pkg)
			}
		}
	}
	if len(missing) > 0 {
		t.Skipf("Slurm is not installed: no %s (Debian: apt-get install -y %s; .ci/run installs them where apt-get can)",
			strings.Join(missing, ", "), strings.Join(pkgs, " "))
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: slurmd starts each job as the user who submitted it (CI runs .ci/run as root)")
	}
	// Every process of the cluster runs as root: munged is told (--force)
	// to start although a folder on its socket's path is closed to
	// others, as TMPDIR is under go test and the mutation check.
	dir, err := os.MkdirTemp("", "miotool-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{dir: dir, conf: filepath.Join(dir, "slurm.conf"), node: fmt.Sprintf("miotool%d", os.Getpid())}
	t.Cleanup(func() { c.stop(t) })
	for _, sub := range []string{"run", "state", "log", "tmp", "spool/" + c.node} {
		must(t, os.MkdirAll(filepath.Join(dir, sub), 0o755))
	}
	must(t, os.Chmod(dir, 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "munge"), 0o700))
	key := make([]byte, 1024)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(dir, "munge", "munge.key")
	must(t, os.WriteFile(keyFile, key, 0o400))
	socket := filepath.Join(dir, "run", "munge.socket")
	ports := freePorts(t, 2)
	must(t, os.WriteFile(c.conf, []byte(c.config(socket, ports)), 0o644))
	c.env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"TMPDIR=" + filepath.Join(dir, "tmp"), "SLURM_CONF=" + c.conf, "LANG=C",
	}

	c.start(t, "munged", "munged", "-F", "--force", "--key-file="+keyFile, "--socket="+socket,
		"--pid-file="+filepath.Join(dir, "run", "munged.pid"), "--seed-file="+filepath.Join(dir, "munge", "seed"),
		"--log-file="+filepath.Join(dir, "log", "munged.log"))
	c.await(t, "munged's socket", func() bool { _, err := os.Stat(socket); return err == nil })
	c.start(t, "slurmctld", "slurmctld", "-D", "-i", "-f", c.conf)
	c.await(t, "slurmctld to answer", func() bool {
		out, err := c.try("scontrol", "ping")
		return err == nil && strings.Contains(out, "is UP")
	})
	c.start(t, "slurmd", "slurmd", "-D", "-N", c.node, "-f", c.conf)
	c.await(t, "node "+c.node+" to be idle", func() bool {
		out, err := c.try("sinfo", "-h", "-N", "-n", c.node, "-o", "%t")
		return err == nil && strings.TrimSpace(out) == "idle"
	})
	return c
}

// config is a one-node cluster: no accounting, no cgroups (processes are
// tracked through /proc), jobs sharing the node's CPUs.
func (c *cluster) config(socket string, ports []int) string {
	lines := []string{
		"ClusterName=miotooltest",
		"SlurmctldHost=localhost",
		"SlurmctldPort=" + strconv.Itoa(ports[0]),
		"SlurmdPort=" + strconv.Itoa(ports[1]),
		"AuthType=auth/munge",
		"CredType=cred/munge",
		"AuthInfo=socket=" + socket,
		"SlurmUser=root",
		"SlurmdUser=root",
		"StateSaveLocation=" + filepath.Join(c.dir, "state"),
		"SlurmdSpoolDir=" + filepath.Join(c.dir, "spool", "%n"),
		"SlurmctldPidFile=" + filepath.Join(c.dir, "run", "slurmctld.pid"),
		"SlurmdPidFile=" + filepath.Join(c.dir, "run", "slurmd.pid"),
		"SlurmctldLogFile=" + filepath.Join(c.dir, "log", "slurmctld.log"),
		"SlurmdLogFile=" + filepath.Join(c.dir, "log", "slurmd.log"),
		"ProctrackType=proctrack/linuxproc",
		"TaskPlugin=task/none",
		"JobAcctGatherType=jobacct_gather/none",
		"AccountingStorageType=accounting_storage/none",
		"JobCompType=jobcomp/none",
		"MpiDefault=none",
		"SchedulerType=sched/backfill",
		"SelectType=select/cons_tres",
		"SelectTypeParameters=CR_CPU",
		// The node's CPUs as configured, whatever the machine has.
		"SlurmdParameters=config_overrides",
		"ReturnToService=2",
		// What Slurm waits after SIGTERM before SIGKILL: miotool writes
		// its interrupted result well within it.
		"KillWait=15",
		// Ended jobs stay visible to scontrol for the test's whole run.
		"MinJobAge=3600",
		fmt.Sprintf("NodeName=%s NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN", c.node),
		fmt.Sprintf("PartitionName=test Nodes=%s Default=YES MaxTime=INFINITE State=UP", c.node),
	}
	return strings.Join(lines, "\n") + "\n"
}

func (c *cluster) start(t *testing.T, name string, argv ...string) {
	t.Helper()
	log := filepath.Join(c.dir, "log", name+".out")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = c.env, c.dir, f, f
	// Its own group, and killed with the test binary's thread if the test
	// dies before its cleanup runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	d := &daemon{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(d.done)
	}()
	c.daemons = append(c.daemons, d)
}

// await polls ready until it holds, failing the test when a daemon exits
// or a minute passes (wide, for a loaded machine).
func (c *cluster) await(t *testing.T, what string, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ready() {
		for _, d := range c.daemons {
			select {
			case <-d.done:
				t.Fatalf("waiting for %s: %s exited (%v)\n%s", what, d.name, d.cmd.ProcessState, c.logs())
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within a minute\n%s", what, c.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// try runs a client command of the cluster, bounded by a minute.
func (c *cluster) try(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), err
}

func (c *cluster) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := c.try(name, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, c.logs())
	}
	return out
}

// job is what scontrol says of an ended job.
type job struct {
	State    string // COMPLETED, FAILED, CANCELLED, ...
	ExitCode string // "0:0": the exit status, then the signal
}

var endedStates = []string{"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}

// jobState reads a job's state and exit code.
func (c *cluster) jobState(t *testing.T, id string) job {
	t.Helper()
	return parseJob(strings.Split(c.run(t, "scontrol", "-o", "show", "job", id), "\n")[0])
}

// taskStates reads the state of each task of an array job, by task id. A
// task cancelled while it waited is listed in the array's own record.
func (c *cluster) taskStates(t *testing.T, array string) map[string]job {
	t.Helper()
	out := c.run(t, "scontrol", "-o", "show", "job", array)
	tasks := map[string]job{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		for _, field := range strings.Fields(line) {
			if ids, ok := strings.CutPrefix(field, "ArrayTaskId="); ok {
				for _, id := range taskIDs(ids) {
					tasks[id] = parseJob(line)
				}
			}
		}
	}
	return tasks
}

// taskIDs are the ids scontrol lists as "3", "2-3" or "1,4-5" (tasks
// that wait share one record), each on its own.
func taskIDs(s string) []string {
	var out []string
	for part := range strings.SplitSeq(strings.Trim(s, "[]"), ",") {
		lo, hi, isRange := strings.Cut(strings.Split(part, "%")[0], "-")
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if !isRange || errA != nil || errB != nil {
			out = append(out, part)
			continue
		}
		for i := a; i <= b; i++ {
			out = append(out, strconv.Itoa(i))
		}
	}
	return out
}

func parseJob(line string) job {
	var j job
	for _, field := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(field, "JobState="); ok {
			j.State = v
		}
		if v, ok := strings.CutPrefix(field, "ExitCode="); ok {
			j.ExitCode = v
		}
	}
	return j
}

// waitJob waits for a job to end, within limit.
func (c *cluster) waitJob(t *testing.T, id string, limit time.Duration) job {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		j := c.jobState(t, id)
		if slices.Contains(endedStates, j.State) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is still %s after %v\n%s\n%s", id, j.State, limit, c.run(t, "squeue"), c.logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// stop cancels every job, waits for them to end, stops the daemons and
// then looks for any process of the cluster left behind: each is named,
// killed, and fails the test.
func (c *cluster) stop(t *testing.T) {
	if c.running("slurmctld") {
		if _, err := c.try("scancel", "--partition=test"); err == nil {
			deadline := time.Now().Add(time.Minute)
			for time.Now().Before(deadline) {
				out, err := c.try("squeue", "-h", "-o", "%i %T")
				if err != nil || strings.TrimSpace(out) == "" {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	for i := len(c.daemons) - 1; i >= 0; i-- {
		d := c.daemons[i]
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop within 30s of SIGTERM; killed", d.name)
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
		}
	}
	// slurmstepd and the jobs' processes left no group of ours: they
	// are found by the configuration in their environment. A step may
	// still be going away for a moment after the daemons stopped.
	deadline := time.Now().Add(10 * time.Second)
	left := c.processes()
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		left = c.processes()
	}
	for _, p := range left {
		t.Errorf("left running after the cluster stopped: pid %d: %s", p.pid, p.cmdline)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	if t.Failed() {
		t.Logf("cluster logs:\n%s", c.logs())
	}
	if err := os.RemoveAll(c.dir); err != nil {
		t.Errorf("removing the cluster's folder: %v", err)
	}
}

// running reports whether the named daemon was started and is running.
func (c *cluster) running(name string) bool {
	for _, d := range c.daemons {
		if d.name == name {
			select {
			case <-d.done:
				return false
			default:
				return true
			}
		}
	}
	return false
}

type process struct {
	pid     int
	cmdline string
	environ []string
}

// getenv is the value of the variable name in p's environment.
func (p process) getenv(name string) string {
	for _, kv := range p.environ {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// processes are the live processes whose environment names this
// cluster's configuration: its daemons' children and its jobs.
func (c *cluster) processes() []process {
	mark := []byte("SLURM_CONF=" + c.conf + "\x00")
	entries, _ := os.ReadDir("/proc")
	var out []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.HasPrefix(env, mark) && !bytes.Contains(env, append([]byte("\x00"), mark...)) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil || zombie(stat) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, process{pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")),
			strings.Split(strings.TrimRight(string(env), "\x00"), "\x00")})
	}
	return out
}

// zombie reports whether /proc/PID/stat says the process has exited and
// waits for its parent to reap it.
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// findProcess waits, within limit, for a process of the cluster whose
// command line holds every one of words.
func (c *cluster) findProcess(t *testing.T, limit time.Duration, words ...string) process {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		for _, p := range c.processes() {
			fields := strings.Fields(p.cmdline)
			if !slices.ContainsFunc(words, func(w string) bool { return !slices.Contains(fields, w) }) {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process of the cluster runs %q after %v\n%s", words, limit, c.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logs are the ends of the daemons' logs, for a failure's message.
func (c *cluster) logs() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(c.dir, "log", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "== %s\n%s\n", filepath.Base(f), strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	return b.String()
}

// freePorts are n TCP ports nothing listens on now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
