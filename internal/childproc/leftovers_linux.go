package childproc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

var subreaper sync.Once

// becomeSubreaper makes this process the subreaper of everything it
// starts: a descendant whose parent ends comes back to it as an orphan
// instead of going to init, where endLeftovers finds it.
func becomeSubreaper() {
	subreaper.Do(func() {
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	})
}

// endLeftovers ends what the child, whose group pgid has just been killed,
// left running outside it, and reaps what of it came back to this process:
// the group's members whose parent died (orphans, killed with the group),
// and the descendants that carry its token in their environment whatever
// group or session they moved to, killed here. Killing one makes its own
// children orphans in turn, so it goes round until a look finds none and
// the group is empty, or until deadline. It returns how many of the
// token's holders it killed. Only this process's children are signalled
// one by one: their ids cannot be reused before they are reaped.
func endLeftovers(pgid int, token string, deadline time.Time) (escaped int) {
	self := os.Getpid()
	killed := map[int]bool{}
	pause := time.Millisecond
	for {
		var reap []int
		for _, c := range childrenOf(self) {
			switch {
			case c.pgrp == pgid:
				reap = append(reap, c.pid) // killed with the group
			case !c.zombie && holdsToken(c.pid, token):
				if !killed[c.pid] {
					killed[c.pid] = true
					escaped++
				}
				_ = syscall.Kill(c.pid, syscall.SIGKILL)
				reap = append(reap, c.pid)
			case c.zombie && killed[c.pid]:
				reap = append(reap, c.pid)
			}
		}
		if len(reap) == 0 && syscall.Kill(-pgid, 0) != nil {
			return escaped
		}
		if !reapAll(reap, deadline) {
			return escaped
		}
		if len(reap) == 0 {
			// Members of the group that are not this process's children
			// are still dying; nothing says when they are gone.
			if time.Until(deadline) < pause {
				return escaped
			}
			time.Sleep(pause)
			pause = min(2*pause, 50*time.Millisecond)
		}
	}
}

// reapAll waits for the children pids to end, and reaps them, until
// deadline; it says whether they all ended by then. One that has not is
// reaped later, when it does.
func reapAll(pids []int, deadline time.Time) bool {
	if len(pids) == 0 {
		return true
	}
	var wg sync.WaitGroup
	for _, pid := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ws syscall.WaitStatus
			for {
				if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
					return
				}
			}
		}()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-all:
		return true
	case <-timer.C:
		return false
	}
}

// process is what /proc/PID/stat says of a process.
type process struct {
	pid, ppid, pgrp int
	zombie          bool
}

// childrenOf lists the processes whose parent is ppid. It reads every
// process's stat: an orphan adopted by this process sits in the children
// file of one of its threads and moves to another when that thread ends,
// so only the whole table says for sure. Each stat is read with an open,
// a read and a close into one buffer: Glob and ReadFile spent six system
// calls on each, 10 ms at the end of every run on a host with two hundred
// processes. Spreading the reads over goroutines made it slower, not
// faster: the threads they need are started for this one look.
func childrenOf(ppid int) []process {
	var out []process
	var buf [statBufferSize]byte
	for _, pid := range processIDs() {
		if p, ok := readStatInto("/proc/"+strconv.Itoa(pid)+"/stat", buf[:]); ok && p.ppid == ppid {
			out = append(out, p)
		}
	}
	return out
}

// processIDs lists the ids of /proc's processes.
func processIDs() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	pids := make([]int, 0, len(names))
	for _, name := range names {
		if name[0] < '1' || name[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(name); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// statBufferSize holds a stat line up to its process group and far
// beyond: the command name before them is at most 64 bytes.
const statBufferSize = 512

func readStat(path string) (process, bool) {
	var buf [statBufferSize]byte
	return readStatInto(path, buf[:])
}

// readStatInto reads the stat file at path with one read into buf: an
// open, a read and a close, where ReadFile adds a stat and a second read.
func readStatInto(path string, buf []byte) (process, bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return process{}, false // it ended while we looked
	}
	var n int
	for {
		n, err = syscall.Read(fd, buf)
		if err != syscall.EINTR {
			break
		}
	}
	_ = syscall.Close(fd)
	if err != nil || n <= 0 {
		return process{}, false
	}
	return parseStat(buf[:n])
}

// parseStat reads a stat line: pid (comm) state ppid pgrp ...; comm may
// hold spaces and parentheses, and nothing after it does.
func parseStat(data []byte) (process, bool) {
	i := bytes.LastIndexByte(data, ')')
	open := bytes.IndexByte(data, '(')
	if i < 0 || open < 0 || open > i {
		return process{}, false
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 3 {
		return process{}, false
	}
	pid, err1 := strconv.Atoi(string(bytes.TrimSpace(data[:open])))
	ppid, err2 := strconv.Atoi(string(f[1]))
	pgrp, err3 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil || err3 != nil {
		return process{}, false
	}
	return process{pid: pid, ppid: ppid, pgrp: pgrp, zombie: f[0][0] == 'Z' || f[0][0] == 'X'}, true
}

func holdsToken(pid int, token string) bool {
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return err == nil && hasToken(environ, token)
}

// watcherScript is the watcher of this process's death, run by /bin/sh
// with the child's token and a folder to remove. It reads lines on its
// standard input: "group PGID" once the child runs, "done" once it and
// what it started have ended. When its input ends without "done", this
// process died first (SIGKILL, a crash): it kills the child's group,
// removes the folder, and kills every process whose environment holds the
// token, again until none is left (killing one may have raced with its
// fork). It ignores the signals a terminal or a group kill would send
// it.
const watcherScript = `trap '' INT TERM HUP QUIT TSTP TTIN TTOU PIPE
group=
while read -r word arg; do
	case $word in
	group) group=$arg ;;
	done) exit 0 ;;
	esac
done
[ -n "$group" ] && kill -KILL "-$group" 2>/dev/null
[ -n "$2" ] && rm -rf -- "$2"
pass=0
while [ "$pass" -lt 20 ]; do
	pass=$((pass + 1))
	found=
	for e in $(grep -laF -e "$1" /proc/[0-9]*/environ 2>/dev/null); do
		p=${e#/proc/}
		kill -KILL "${p%/environ}" 2>/dev/null && found=1
	done
	[ -n "$found" ] || break
done
exit 0`

// watcher is the process that ends a child, and what it started, when
// this process dies before it has.
type watcher struct {
	cmd *exec.Cmd
	w   *os.File // the watcher's input
}

// startWatcher starts the watcher of the child with token, in a group of
// its own, out of reach of the terminal's signals. Where there is no
// /bin/sh there is none (nil), and the child's own death signal is all
// that ends it with this process.
func startWatcher(token, leftover string) *watcher {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/bin:/bin"
	}
	cmd := exec.Command("/bin/sh", "-c", watcherScript, "miotool-watcher", token, leftover)
	// Its environment holds no token: it is no one's descendant to end.
	cmd.Env = []string{"PATH=" + path}
	cmd.Stdin = pr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = pr.Close()
	if err != nil {
		_ = pw.Close()
		return nil
	}
	return &watcher{cmd: cmd, w: pw}
}

// watch tells the watcher the child's group.
func (w *watcher) watch(pgid int) {
	if w != nil {
		_, _ = fmt.Fprintf(w.w, "group %d\n", pgid)
	}
}

// release tells the watcher the child has ended, and reaps it.
func (w *watcher) release() {
	if w == nil {
		return
	}
	_, _ = w.w.Write([]byte("done\n"))
	_ = w.w.Close()
	_ = w.cmd.Wait()
}
