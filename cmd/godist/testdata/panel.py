"""The live cluster panel through jupyter_client, with the kernel spoken to as Debian's
Notebook 6 widget front end: a %%distributed cell opens the panel's comms (an HTML table
and a Stop button in a VBox), its updates show both workers running and then exited;
cluster.Launch called in a cell shows the same panel; the Stop button, clicked while a long %%distributed Fit runs, stops the job promptly and the
panel says stopped."""
import re
import time
import unittest

import widgets
from kernelcase import KernelCase

TIMEOUT = 120

SHORT = '''%%distributed --workers 2
import (
    "fmt"
    "time"
)
fmt.Println("hello")
time.Sleep(1500 * time.Millisecond)
fmt.Println("bye")
'''

# The long %%distributed Fit of the interrupt tests stops here by the panel's button.
from training import DISTRIBUTED as LONG

LAUNCH = '''import (
    "context"
    "fmt"
    "os"
    "strings"
    "path/filepath"
    "godist/distlib/cluster"
)
dir, _ := os.MkdirTemp("", "godist-panel-")
file := filepath.Join(dir, "task.go")
os.WriteFile(file, []byte("import \\"fmt\\"\\nfmt.Println(\\"hi from the task\\")\\n"), 0o644)
bin, _ := os.Executable()
var out strings.Builder
err := cluster.Launch(context.Background(), cluster.LaunchSpec{Workers: 2, Program: bin, Args: []string{"worker-cell", file}, Output: &out})
os.RemoveAll(dir)
fmt.Println("launch:", err)
'''


def row(task, state):
    """A regexp for the panel's row of task in state."""
    return re.compile(r'<tr><td>%s</td><td>127\.0\.0\.1:\d+</td><td class="godist-task-state godist-state-%s">%s</td>'
                      % (task, state, state))


class PanelTests(KernelCase):
    shell_send = widgets.GodistWidgetTests.shell_send
    comm_msg = widgets.GodistWidgetTests.comm_msg
    validate_version = widgets.GodistWidgetTests.validate_version

    def reply_to(self, msg_id, timeout=TIMEOUT):
        return super().reply_to(msg_id, timeout)

    def panel_messages(self, msg_id, until, timeout=TIMEOUT):
        """Reads iopub until until(html values, button comm id) is true or the cell is idle;
        returns the panel's HTML values in order, the Stop button's comm id, the comm ids
        closed, and whether the cell went idle."""
        values, closed = [], set()
        html_id, button_id = getattr(self, "html_id", None), getattr(self, "button_id", None)
        deadline = time.time() + timeout
        while True:
            if until(values, button_id):
                return values, button_id, closed, False
            m = self.kc.get_iopub_msg(timeout=max(0.01, deadline - time.time()))
            t, c = m["msg_type"], m["content"]
            if t == "comm_open":
                name = c["data"].get("_model_name")
                if name == "HTMLModel" and "godist-cluster-panel" in c["data"].get("value", ""):
                    html_id = self.html_id = c["comm_id"]
                    values.append(c["data"]["value"])
                elif name == "ButtonModel" and c["data"].get("description") == "Stop":
                    button_id = self.button_id = c["comm_id"]
            elif t == "comm_msg" and c["comm_id"] == html_id and "value" in c["data"].get("state", {}):
                values.append(c["data"]["state"]["value"])
            elif t == "comm_close":
                closed.add(c["comm_id"])
            elif t == "status" and m["parent_header"].get("msg_id") == msg_id and c["execution_state"] == "idle":
                return values, button_id, closed, True

    def test_distributed_panel_live(self):
        self.validate_version()
        msg_id = self.kc.execute(SHORT)
        values, button_id, closed, idle = self.panel_messages(msg_id, lambda v, b: False)
        self.assertTrue(idle)
        self.assertEqual(self.reply_to(msg_id)["content"]["status"], "ok")
        self.assertTrue(values, "the panel's HTML widget was not opened")
        self.assertIsNotNone(button_id, "no Stop button")
        self.assertIn('<table class="godist-cluster-panel">', values[0])
        running = [v for v in values if row("worker 0", "running").search(v) and row("worker 1", "running").search(v)]
        self.assertTrue(running, "no update shows both workers running:\n%s" % "\n".join(values))
        self.assertIn("<code>hello</code>", running[0])
        last = values[-1]
        self.assertRegex(last, row("worker 0", "exited"))
        self.assertRegex(last, row("worker 1", "exited"))
        self.assertIn("<code>bye</code>", last)
        self.assertIn('<div class="godist-cluster-status"><b>%%distributed --workers 2</b>: done</div>', last)
        self.assertIn(button_id, closed, "the Stop button stays after the job ended")
        self.assertLess(values.index(running[0]), len(values) - 1)

    def test_launch_from_a_cell(self):
        self.validate_version()
        msg_id = self.kc.execute(LAUNCH)
        values, button_id, closed, idle = self.panel_messages(msg_id, lambda v, b: False)
        reply = self.reply_to(msg_id)
        self.assertEqual(reply["content"]["status"], "ok", reply["content"])
        self.assertTrue(values, "cluster.Launch in a cell opened no panel")
        last = values[-1]
        self.assertIn('<b>cluster.Launch: 2 workers</b>: done</div>', last)
        for task in ("worker 0", "worker 1"):
            self.assertRegex(last, row(task, "exited"))
        self.assertIn("<code>hi from the task</code>", last)
        self.assertIn(button_id, closed)

    def test_stop_button(self):
        self.validate_version()
        msg_id = self.kc.execute(LONG)
        epoch = re.compile(r"<td>\d+/100000</td>")

        def training(values, button_id):
            return button_id is not None and any(
                row("worker 0", "running").search(v) and row("worker 1", "running").search(v) and epoch.search(v)
                for v in values)
        values, button_id, _, idle = self.panel_messages(msg_id, training)
        self.assertFalse(idle, "the cell ended before training:\n%s" % "\n".join(values))
        started = time.time()
        self.shell_send("comm_msg", {"comm_id": button_id, "data": {"method": "custom", "content": {"event": "click"}}})
        reply = self.reply_to(msg_id, timeout=30)
        elapsed = time.time() - started
        self.assertEqual(reply["content"]["status"], "error", reply["content"])
        self.assertIn("Stop button", reply["content"]["evalue"])
        self.assertLess(elapsed, 10, "the Stop button took %.1fs to stop the job" % elapsed)
        rest, _, closed, idle = self.panel_messages(msg_id, lambda v, b: False)
        self.assertTrue(idle)
        last = (values + rest)[-1]
        self.assertIn("</b>: stopped</div>", last)
        self.assertRegex(last, row("worker 0", "stopped"))
        self.assertRegex(last, row("worker 1", "stopped"))
        self.assertIn(button_id, closed)
        # The kernel runs the next cell.
        reply, _ = self.execute("1 + 1")
        self.assertEqual(reply["content"]["status"], "ok")


if __name__ == "__main__":
    unittest.main(verbosity=2)
