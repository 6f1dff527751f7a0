"""Widget protocol tests of the godist kernel through jupyter_client, speaking to it as
Debian's Notebook 6 widget front end (jupyter-js-widgets 2.1.4, ipywidgets 6) does:
the jupyter.widget.version comm, widget models on jupyter.widget comms with their state,
updates, the display method, a button click as a custom message, Output capture, close,
and Keras' Fit drawing its progress bar as widgets. As Notebook 6 does when it connects,
each test first validates the version (protocol 1), except those about the front ends that
never do; widgets2.py speaks protocol 2."""
import re
import time
import unittest
import uuid

from kernelcase import KernelCase

TIMEOUT = 60
VERSION = "~2.1.4"

FIT = '''import (
    "godist/distlib/data"
    "godist/distlib/keras"
    "godist/distlib/keras/layers"
    "godist/distlib/tensor"
)
x := tensor.RandomNormal([]int{256, 8}, 0, 1, 1)
y := tensor.ReduceSum(x, 1)
ds := data.FromTensorSlices(x, y).Batch(64, false)
model := keras.Sequential(layers.Dense(1, layers.InputShape(8)))
model.Compile(keras.Adam(1e-2), keras.MeanSquaredError())
h := model.Fit(ds, keras.Epochs(2))'''

# FIT_PRINTS is FIT with a callback that prints at each epoch's end.
FIT_PRINTS = FIT.replace('import (', 'import (\n    "fmt"', 1).replace(
    "h := model.Fit(ds, keras.Epochs(2))",
    'cb := keras.LambdaCallback{OnEpochEnd: func(e int, _ keras.Logs) { fmt.Println("callback after epoch", e+1) }}\n'
    "h := model.Fit(ds, keras.Epochs(2), keras.Callbacks(cb))")

# EPOCH_LINE is Keras 3's closing line of an epoch of FIT, its colour codes taken out.
EPOCH_LINE = r"4/4 ━{20} \d+s \d+[mu]?s/step - loss: [0-9.]+(e-\d+)?"


def plain(s):
    """s without ANSI colour codes."""
    return re.sub(r"\x1b\[[0-9;]*m", "", s)


class GodistWidgetTests(KernelCase):
    # Tests of a front end that has not (yet) validated the widget version.
    UNVALIDATED = ("test_version_comm", "test_fit_progress_is_text_without_widgets")

    def setUp(self):
        super().setUp()
        reply, _ = self.execute('import "godist/distlib/widgets"')
        self.assertEqual(reply["content"]["status"], "ok", reply["content"])
        if self._testMethodName not in self.UNVALIDATED:
            self.validate_version()

    def run_ok(self, code):
        reply, pub = self.execute(code)
        self.assertEqual(reply["content"]["status"], "ok", (code, reply["content"], pub))
        return pub

    def value(self, expr):
        pub = self.run_ok(expr)
        for m in pub:
            if m["msg_type"] == "execute_result":
                return m["content"]["data"]["text/plain"]
        self.fail("no result for %s: %s" % (expr, [m["msg_type"] for m in pub]))

    def shell_send(self, msg_type, content):
        msg = self.kc.session.msg(msg_type, content)
        self.kc.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    def comm_msg(self, comm_id, data):
        msg_id = self.shell_send("comm_msg", {"comm_id": comm_id, "data": data})
        return self.iopub_until_idle(msg_id)

    def validate_version(self):
        """Open jupyter.widget.version as the front end does and answer validated."""
        comm_id = uuid.uuid4().hex
        msg_id = self.shell_send("comm_open", {"comm_id": comm_id, "target_name": "jupyter.widget.version", "data": {}})
        pub = self.iopub_until_idle(msg_id)
        sent = [m for m in pub if m["msg_type"] in ("comm_msg", "comm_close")]
        self.assertEqual(len(sent), 1, [m["msg_type"] for m in pub])
        self.assertEqual(sent[0]["msg_type"], "comm_msg", "the kernel closed the version comm (no target?)")
        self.assertEqual(sent[0]["content"]["comm_id"], comm_id)
        self.assertEqual(sent[0]["content"]["data"], {"version": VERSION})
        self.comm_msg(comm_id, {"validated": True, "frontend_version": "2.1.4"})

    @staticmethod
    def opens(pub):
        return {m["content"]["data"]["_model_name"]: m["content"] for m in pub if m["msg_type"] == "comm_open"}

    @staticmethod
    def comm_msgs(pub, comm_id):
        return [m["content"]["data"] for m in pub if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id]

    # --- tests ----------------------------------------------------------------------

    def test_version_comm(self):
        self.assertEqual(self.value("widgets.Ready()"), "false")
        self.validate_version()
        self.assertEqual(self.value("widgets.Ready()"), "true")
        self.assertEqual(self.value("widgets.FrontendVersionSeen()"), "2.1.4")
        self.assertIn("ipywidgets 6 (widget protocol 1)", self.value("widgets.FrontendSeen()"))

    def test_progress_open_update_display_close(self):
        pub = self.run_ok("p := widgets.NewIntProgress(0, 10)\np.SetDescription(\"Loading:\")\np.Display()\np.SetValue(3)")
        opens = self.opens(pub)
        self.assertEqual(set(opens), {"LayoutModel", "ProgressStyleModel", "ProgressModel"})
        prog = opens["ProgressModel"]
        self.assertEqual(prog["target_name"], "jupyter.widget")
        state = prog["data"]
        for k, v in {"_model_module": "jupyter-js-widgets", "_model_module_version": VERSION,
                     "_view_name": "ProgressView", "_view_module": "jupyter-js-widgets",
                     "_view_module_version": VERSION, "value": 0, "min": 0, "max": 10,
                     "bar_style": "", "orientation": "horizontal"}.items():
            self.assertEqual(state[k], v, k)
        self.assertEqual(state["layout"], "IPY_MODEL_" + opens["LayoutModel"]["comm_id"])
        self.assertEqual(state["style"], "IPY_MODEL_" + opens["ProgressStyleModel"]["comm_id"])
        pid = prog["comm_id"]
        msgs = self.comm_msgs(pub, pid)
        self.assertEqual(msgs, [
            {"method": "update", "state": {"description": "Loading:"}, "buffers": []},
            {"method": "display"},
            {"method": "update", "state": {"value": 3}, "buffers": []},
        ])
        shown = [m for m in pub if m["msg_type"] == "display_data"]
        self.assertEqual(len(shown), 1)
        # Notebook 6 would draw a text/plain part beside the widget: the view alone.
        self.assertEqual(shown[0]["content"]["data"], {"application/vnd.jupyter.widget-view+json": {"model_id": pid}})

        # A later cell's change is an update; the same value again sends nothing.
        pub = self.run_ok("p.SetValue(7)\np.SetValue(7)\np.SetValue(12)")
        self.assertEqual(self.comm_msgs(pub, pid), [
            {"method": "update", "state": {"value": 7}, "buffers": []},
            {"method": "update", "state": {"value": 10}, "buffers": []},
        ])
        # The front end asks for the state (a reloaded page does).
        pub = self.comm_msg(pid, {"method": "request_state"})
        self.assertEqual(self.comm_msgs(pub, pid)[0]["state"]["value"], 10)

        reply = self.kc.comm_info(target_name="jupyter.widget", reply=True)
        self.assertIn(pid, reply["content"]["comms"])
        pub = self.run_ok("p.Close()")
        closed = [m["content"]["comm_id"] for m in pub if m["msg_type"] == "comm_close"]
        self.assertEqual(sorted(closed), sorted(o["comm_id"] for o in opens.values()))
        reply = self.kc.comm_info(target_name="jupyter.widget", reply=True)
        self.assertNotIn(pid, reply["content"]["comms"])

    def test_validated_display_has_no_text(self):
        pub = self.run_ok('h := widgets.NewHTML("<b>hi</b>")\nh.Display()')
        hid = self.opens(pub)["HTMLModel"]["comm_id"]
        shown = [m for m in pub if m["msg_type"] == "display_data"]
        self.assertEqual(shown[0]["content"]["data"], {"application/vnd.jupyter.widget-view+json": {"model_id": hid}})

    def test_button_click_runs_go_callback(self):
        pub = self.run_ok('clicks := 0\nb := widgets.NewButton("Stop")\n'
                          'b.OnClick(func(*widgets.Button) { clicks++ })\nb.Display()')
        opens = self.opens(pub)
        self.assertEqual(opens["ButtonModel"]["data"]["description"], "Stop")
        bid = opens["ButtonModel"]["comm_id"]
        for _ in range(2):
            self.comm_msg(bid, {"method": "custom", "content": {"event": "click"}})
        # A user edit arrives as backbone sync_data and changes the Go side's state.
        self.comm_msg(bid, {"method": "backbone", "sync_data": {"disabled": True}})
        self.assertEqual(self.value("clicks"), "2")
        self.assertEqual(self.value('b.Get("disabled")'), "true")

    def test_update_after_cell_ends(self):
        # interp cuts a goroutine's time.Sleep short when its cell ends; a timer is not.
        msg_id = self.kc.execute('import "time"\nl := widgets.NewLabel("start")\nl.Display()\n'
                                 'go func() { <-time.After(time.Second); l.SetValue("done") }()')
        self.assertEqual(self.reply_to(msg_id)["content"]["status"], "ok")
        lid, idle, deadline = None, False, time.time() + TIMEOUT
        while True:
            m = self.kc.get_iopub_msg(timeout=max(0.01, deadline - time.time()))
            parent = m["parent_header"].get("msg_id")
            if m["msg_type"] == "comm_open" and m["content"]["data"]["_model_name"] == "LabelModel":
                lid = m["content"]["comm_id"]
            elif m["msg_type"] == "status" and parent == msg_id and m["content"]["execution_state"] == "idle":
                idle = True
            elif m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == lid and "state" in m["content"]["data"]:
                self.assertEqual(m["content"]["data"]["state"], {"value": "done"})
                # Sent by the goroutine, usually after the cell's idle (then with no parent).
                self.assertIn(parent, (None, msg_id))
                self.assertTrue(idle or parent == msg_id)
                return

    def test_output_capture_keeps_order(self):
        msg_id = self.kc.execute('import "fmt"\nout := widgets.NewOutput()\nout.Display()\n'
                                 'out.Capture(func() { fmt.Println("inside") })\nfmt.Println("after")')
        self.assertEqual(self.reply_to(msg_id)["content"]["status"], "ok")
        pub = self.iopub_until_idle(msg_id)
        oid = self.opens(pub)["OutputModel"]["comm_id"]
        seq = []
        for m in pub:
            if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == oid and m["content"]["data"].get("method") == "update":
                seq.append("msg_id=" + m["content"]["data"]["state"]["msg_id"])
            elif m["msg_type"] == "stream":
                seq.extend("print " + line for line in m["content"]["text"].splitlines())
        self.assertEqual(seq, ["msg_id=" + msg_id, "print inside", "msg_id=", "print after"])
        # After the cell, appended text goes to the widget: its model id is the parent.
        self.run_ok('out.AppendStdout("later\\n")')

    def execute_all(self, code):
        """Runs code and returns every iopub message until the cell's idle: also the output
        published for an Output widget (its parent is the widget's model id)."""
        msg_id = self.kc.execute(code)
        out = []
        while True:
            m = self.kc.get_iopub_msg(timeout=TIMEOUT)
            out.append(m)
            if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "status" and \
                    m["content"]["execution_state"] == "idle":
                break
        reply = self.reply_to(msg_id)
        self.assertEqual(reply["content"]["status"], "ok", reply["content"])
        return msg_id, out

    def test_fit_progress_is_a_widget(self):
        # One box: the history (an Output) over the live row, the bar with the epoch as its
        # description and the steps, time left and metrics beside it. While Fit runs the
        # history captures the cell's output (its msg_id is the cell's): the epochs' lines
        # and what a callback prints at each epoch's end come there in that order; when Fit
        # ends the live row goes and the history stays.
        cell, pub = self.execute_all(FIT_PRINTS)
        opens = self.opens(pub)
        for name in ("VBoxModel", "OutputModel", "HBoxModel", "ProgressModel", "HTMLModel"):
            self.assertIn(name, opens)
        box, out = opens["VBoxModel"]["comm_id"], opens["OutputModel"]["comm_id"]
        bar, text = opens["ProgressModel"]["comm_id"], opens["HTMLModel"]["comm_id"]
        self.assertEqual(opens["VBoxModel"]["data"]["children"], ["IPY_MODEL_" + out, "IPY_MODEL_" + opens["HBoxModel"]["comm_id"]])
        states = [d["state"] for d in self.comm_msgs(pub, bar) if d.get("method") == "update"]
        self.assertEqual([s["description"] for s in states if "description" in s], ["Epoch 1/2", "Epoch 2/2"])
        self.assertEqual([s["value"] for s in states if "value" in s][-1], 4)
        html = [d["state"]["value"] for d in self.comm_msgs(pub, text) if "value" in d.get("state", {})]
        self.assertRegex(html[-1], r">4/4 \d+s \d+[mu]?s/step - loss: [0-9.]+(e-\d+)?</pre>$")
        seq = []
        for m in pub:
            c, parent = m["content"], m["parent_header"].get("msg_id")
            if m["msg_type"] == "comm_msg" and c["comm_id"] == out and "msg_id" in c["data"].get("state", {}):
                seq.append("msg_id=" + ("cell" if c["data"]["state"]["msg_id"] == cell else c["data"]["state"]["msg_id"]))
            elif m["msg_type"] == "stream":
                to = {out: "history", cell: "cell"}.get(parent, parent)
                seq.extend(to + ": " + plain(line) for line in c["text"].splitlines())
        want = ["msg_id=cell", "cell: Epoch 1/2", "cell: " + EPOCH_LINE, "cell: callback after epoch 1",
                "cell: Epoch 2/2", "cell: " + EPOCH_LINE, "cell: callback after epoch 2", "msg_id="]
        self.assertEqual(len(seq), len(want), seq)
        for got, w in zip(seq, want):
            self.assertRegex(got, "^" + w + "$", seq)
        children = [d["state"]["children"] for d in self.comm_msgs(pub, box) if "children" in d.get("state", {})]
        self.assertEqual(children[-1], ["IPY_MODEL_" + out])
        closed = {m["content"]["comm_id"] for m in pub if m["msg_type"] == "comm_close"}
        self.assertTrue({bar, text, opens["HBoxModel"]["comm_id"]} <= closed, closed)
        shown = [m["content"]["data"] for m in pub if m["msg_type"] in ("display_data", "update_display_data")]
        self.assertEqual(len(shown), 1, shown)
        self.assertIn("application/vnd.jupyter.widget-view+json", shown[0])

    def test_fit_progress_is_text_without_widgets(self):
        # A front end that never validated the widget version (console, nbconvert): each
        # epoch a display updated in place, which the callback's print follows.
        pub = self.run_ok(FIT_PRINTS)
        self.assertEqual(self.opens(pub), {})
        area = []  # the output area as the front end keeps it: [display id, text]
        for m in pub:
            c = m["content"]
            if m["msg_type"] == "display_data":
                area.append([c.get("transient", {}).get("display_id"), c["data"]["text/plain"]])
            elif m["msg_type"] == "update_display_data":
                for o in area:
                    if o[0] == c["transient"]["display_id"]:
                        o[1] = c["data"]["text/plain"]
            elif m["msg_type"] == "stream":
                area.append([None, c["text"].rstrip("\n")])
        text = "\n".join(plain(o[1]) for o in area)
        self.assertRegex(text, "^Epoch 1/2\n" + EPOCH_LINE + "\ncallback after epoch 1\n"
                         "Epoch 2/2\n" + EPOCH_LINE + "\ncallback after epoch 2$")
        self.assertEqual(len({o[0] for o in area if o[0]}), 2, area)

if __name__ == "__main__":
    unittest.main(verbosity=2)
