"""Issue 12, "State and control": the kernel's state after interrupts, deep recursion, a dead
parent, restarts and redefinitions, through jupyter_client."""
import datetime
import os
import signal
import subprocess
import sys
import time
import unittest

from kernelcase import KernelCase


class StateTests(KernelCase):
    def interrupt_sleep(self):
        self.ok('import "time"')
        msg_id = self.start("time.Sleep(time.Hour)")
        time.sleep(0.3)
        self.km.interrupt_kernel()
        reply = self.reply_to(msg_id, timeout=10)
        self.assertEqual(reply["content"]["ename"], "Interrupted", reply["content"])

    def test_function_values_survive_interrupt(self):
        self.ok('f := func(x int) int { return x + 1 }\n'
                'var g = func(x int) int { return x * 2 }\n'
                'scale := map[string]func(float64) float64{"half": func(v float64) float64 { return v / 2 }}\n'
                'ch := make(chan int, 1)\n'
                'send := func(v int) int { ch <- v; r := <-ch; return r }')
        self.interrupt_sleep()
        for code, want in [("f(1)", "2"), ("g(3)", "6"), ('scale["half"](3)', "1.5"), ("send(7)", "7")]:
            self.assertEqual(self.ok(code)[1], want, code)
        # A second interrupt, and a closure made after the first one.
        self.ok("h := func() int { return f(10) }")
        self.interrupt_sleep()
        self.assertEqual(self.ok("h()")[1], "11")

    def test_unbounded_recursion_is_a_cell_error(self):
        for code in ["func rec(n int) int { return rec(n+1) + 1 }\nrec(0)",
                     "var recv func(int) int\nrecv = func(n int) int { return recv(n+1) + 1 }\nrecv(0)"]:
            err, tb = self.fails(code, timeout=120)
            self.assertIn("stack overflow", err)
            self.assertLess(len(tb.splitlines()), 40, tb)
        self.assertEqual(self.ok("1 + 1")[1], "2")

    def test_fatal_error_ends_the_kernel(self):
        # Go's fatal errors cannot be recovered: the kernel must exit (the front end then
        # offers a restart), not hang writing the crash to its own capture pipe.
        self.ok('import "runtime/debug"')
        self.ok("debug.SetMaxStack(256 << 10)")
        msg_id = self.kc.execute("func deep(n int) int { if n == 0 { return 0 }; return deep(n-1) + 1 }\ndeep(20000)")
        deadline = time.time() + 30
        while self.km.is_alive() and time.time() < deadline:
            time.sleep(0.2)
        self.assertFalse(self.km.is_alive(), "the kernel still runs 30s after a fatal error")

    def test_shutdown_queued_for_the_replaced_kernel_is_ignored(self):
        # What a restarted kernel finds in a front end's control socket: a shutdown_request
        # sent (and queued) while the old kernel was going away, dated before the start.
        self.ok("x := 1")
        msg = self.kc.session.msg("shutdown_request", {"restart": True})
        msg["header"]["date"] = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=30)
        self.kc.control_channel.send(msg)
        time.sleep(1.5)
        self.assertTrue(self.km.is_alive(), "the kernel obeyed a shutdown_request dated before it started")
        self.assertEqual(self.ok("x + 1")[1], "2")
        # A current one still works.
        proc = self.km.provisioner.process
        self.kc.shutdown()
        self.assertEqual(proc.wait(timeout=10), 0)

    def test_restarted_kernel_ignores_requests_for_the_old_one(self):
        # The client asks for a restart itself; the kernel exits; the manager, restarting,
        # asks the (gone) kernel to shut down too: that request waits in the manager's
        # socket and reaches the new kernel, which must not obey it.
        self.ok("x := 1")
        proc = self.km.provisioner.process
        self.kc.shutdown(restart=True)
        proc.wait(timeout=10)
        self.km.restart_kernel(now=False)
        self.kc.wait_for_ready(timeout=60)
        time.sleep(1)
        self.assertTrue(self.km.is_alive(), "the restarted kernel exited at once")
        self.assertEqual(self.ok("2 + 2")[1], "4")


# A front end that starts a kernel, sets it busy, prints the kernel's pid and waits.
FRONT_END = """
import sys, time
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="godist", startup_timeout=60)
kc.execute("n := 0\\nfor {\\n\\tn++\\n}")
print(km.provisioner.process.pid, flush=True)
time.sleep(600)
"""


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by init) counts as gone.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


class ParentTests(unittest.TestCase):
    def test_kernel_exits_when_its_front_end_is_killed(self):
        fe = subprocess.Popen([sys.executable, "-c", FRONT_END], stdout=subprocess.PIPE, text=True)
        try:
            pid = int(fe.stdout.readline())
            time.sleep(0.5)
            self.assertTrue(alive(pid))
            fe.send_signal(signal.SIGKILL)
            fe.wait(timeout=10)
            deadline = time.time() + 30
            while alive(pid) and time.time() < deadline:
                time.sleep(0.2)
            self.assertFalse(alive(pid), "the busy kernel still runs 30s after its front end was killed")
        finally:
            if fe.poll() is None:
                fe.kill()
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    unittest.main(verbosity=2)
