"""Widget protocol 2 tests of the godist kernel through jupyter_client, speaking to it as
the protocol 2 front ends do: JupyterLab 4 / Notebook 7 (jupyterlab-manager 5, ipywidgets 8
models) opens jupyter.widget.control when it connects and asks request_states; VS Code
(ipywidgets 7 models for a non-Python kernel) shows itself only by the cellId in each
execute_request's metadata; a front end that shows nothing gets ipywidgets 7 models and
text progress. widgets.py speaks protocol 1 (Notebook 6)."""
import unittest
import uuid

from kernelcase import KernelCase
from widgets import FIT

VIEW = "application/vnd.jupyter.widget-view+json"
VSCODE_META = {"cellId": "vscode-notebook-cell:/home/student/course.ipynb#W2sZmlsZQ%3D%3D"}


class Protocol2Case(KernelCase):
    metadata = {}  # what each execute_request carries

    def setUp(self):
        super().setUp()
        self.run_ok('import "godist/distlib/widgets"')

    def send(self, channel, msg_type, content, metadata=None):
        msg = self.kc.session.msg(msg_type, content, metadata=metadata or {})
        channel.send(msg)
        return msg["header"]["msg_id"]

    def run_ok(self, code):
        msg_id = self.send(self.kc.shell_channel, "execute_request",
                           {"code": code, "silent": False, "store_history": True,
                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
                           self.metadata)
        reply = self.reply_to(msg_id)
        pub = self.iopub_until_idle(msg_id)
        self.assertEqual(reply["content"]["status"], "ok", (code, reply["content"], pub))
        return pub

    def value(self, expr):
        for m in self.run_ok(expr):
            if m["msg_type"] == "execute_result":
                return m["content"]["data"]["text/plain"]
        self.fail("no result for " + expr)

    def comm_msg(self, comm_id, data):
        msg_id = self.send(self.kc.shell_channel, "comm_msg", {"comm_id": comm_id, "data": data})
        return msg_id, self.iopub_until_idle(msg_id)

    @staticmethod
    def opens(pub):
        return {m["content"]["data"]["state"]["_model_name"]: m for m in pub if m["msg_type"] == "comm_open"}

    @staticmethod
    def comm_msgs(pub, comm_id):
        return [m for m in pub if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id]

    def check_models(self, pub, protocol, controls, base):
        opens = self.opens(pub)
        self.assertEqual(set(opens), {"LayoutModel", "ProgressStyleModel", "IntProgressModel"})
        for name, m in opens.items():
            self.assertEqual(m["metadata"], {"version": protocol}, name)
            self.assertEqual(m["content"]["target_name"], "jupyter.widget")
            self.assertEqual(m["content"]["data"]["buffer_paths"], [])
        st = {n: m["content"]["data"]["state"] for n, m in opens.items()}
        self.assertEqual((st["LayoutModel"]["_model_module"], st["LayoutModel"]["_model_module_version"]),
                         ("@jupyter-widgets/base", base))
        self.assertEqual((st["ProgressStyleModel"]["_model_module"], st["ProgressStyleModel"]["_model_module_version"],
                          st["ProgressStyleModel"]["_view_module"], st["ProgressStyleModel"]["_view_name"]),
                         ("@jupyter-widgets/controls", controls, "@jupyter-widgets/base", "StyleView"))
        p = st["IntProgressModel"]
        for k, v in {"_model_module": "@jupyter-widgets/controls", "_model_module_version": controls,
                     "_view_module": "@jupyter-widgets/controls", "_view_module_version": controls,
                     "_view_name": "ProgressView", "value": 0, "min": 0, "max": 10,
                     "layout": "IPY_MODEL_" + opens["LayoutModel"]["content"]["comm_id"],
                     "style": "IPY_MODEL_" + opens["ProgressStyleModel"]["content"]["comm_id"]}.items():
            self.assertEqual(p[k], v, k)
        pid = opens["IntProgressModel"]["content"]["comm_id"]
        shown = [m["content"]["data"] for m in pub if m["msg_type"] == "display_data"]
        self.assertEqual(len(shown), 1, shown)
        self.assertEqual(shown[0][VIEW], {"model_id": pid, "version_major": 2, "version_minor": 0})
        self.assertIn("IntProgress(", shown[0]["text/plain"])
        # No protocol 1 "display" method; the update carries buffer_paths.
        self.assertEqual([m["content"]["data"] for m in self.comm_msgs(pub, pid)],
                         [{"method": "update", "state": {"value": 3}, "buffer_paths": []}])
        return pid

    def check_fit_bar(self):
        pub = self.run_ok(FIT)
        opens = self.opens(pub)
        self.assertIn("IntProgressModel", opens)
        shown = [m["content"]["data"] for m in pub if m["msg_type"] in ("display_data", "update_display_data")]
        self.assertTrue(shown and all(VIEW in d for d in shown), shown)


class JupyterLab4Tests(Protocol2Case):
    """JupyterLab 4 and Notebook 7: the control comm first, then ipywidgets 8 models."""

    def open_control(self):
        comm_id = uuid.uuid4().hex
        msg_id = self.send(self.kc.shell_channel, "comm_open",
                           {"comm_id": comm_id, "target_name": "jupyter.widget.control", "data": {}},
                           {"version": "1.0.0"})
        pub = self.iopub_until_idle(msg_id)
        self.assertFalse([m for m in pub if m["msg_type"] == "comm_close"], "the kernel closed the control comm")
        return comm_id

    def request_states(self, control):
        msg_id, pub = self.comm_msg(control, {"method": "request_states"})
        replies = self.comm_msgs(pub, control)
        self.assertEqual(len(replies), 1, [m["msg_type"] for m in pub])
        self.assertEqual(replies[0]["parent_header"]["msg_id"], msg_id)
        data = replies[0]["content"]["data"]
        self.assertEqual(data["method"], "update_states")
        self.assertEqual(data["buffer_paths"], {})
        return data["states"]

    def test_control_comm_then_widget(self):
        self.assertEqual(self.value("widgets.Ready()"), "false")
        control = self.open_control()
        self.assertEqual(self.request_states(control), {})
        self.assertEqual(self.value("widgets.Ready()"), "true")
        self.assertIn("ipywidgets 8 (widget protocol 2.1.0)", self.value("widgets.FrontendSeen()"))

        pub = self.run_ok("p := widgets.NewIntProgress(0, 10)\np.Display()\np.SetValue(3)")
        pid = self.check_models(pub, "2.1.0", "2.0.0", "2.0.0")

        # A reloaded page asks again: the bar, its layout and its style, with their state.
        states = self.request_states(control)
        self.assertEqual(states[pid]["model_name"], "IntProgressModel")
        self.assertEqual(states[pid]["model_module"], "@jupyter-widgets/controls")
        self.assertEqual(states[pid]["model_module_version"], "2.0.0")
        self.assertEqual(states[pid]["state"]["value"], 3)
        self.assertEqual(len(states), 3, states)

        # The user drags a value in: it reaches Go, and the front end gets its echo.
        msg_id, pub = self.comm_msg(pid, {"method": "update", "state": {"value": 6}, "buffer_paths": []})
        echo = self.comm_msgs(pub, pid)
        self.assertEqual([m["content"]["data"] for m in echo],
                         [{"method": "echo_update", "state": {"value": 6}, "buffer_paths": []}])
        self.assertEqual(echo[0]["parent_header"]["msg_id"], msg_id)
        self.assertEqual(self.value("p.Value()"), "6")

        # A closed widget is gone from the states.
        self.run_ok("p.Close()")
        self.assertEqual(self.request_states(control), {})

    def test_button_click_and_output(self):
        self.open_control()
        pub = self.run_ok('clicks := 0\nb := widgets.NewButton("Stop")\n'
                          'b.OnClick(func(*widgets.Button) { clicks++ })\nb.Display()\n'
                          'out := widgets.NewOutput()\nout.Display()')
        opens = self.opens(pub)
        out = opens["OutputModel"]["content"]["data"]["state"]
        self.assertEqual((out["_model_module"], out["_model_module_version"], out["_view_name"]),
                         ("@jupyter-widgets/output", "1.0.0", "OutputView"))
        bid = opens["ButtonModel"]["content"]["comm_id"]
        self.comm_msg(bid, {"method": "custom", "content": {"event": "click"}})
        self.assertEqual(self.value("clicks"), "1")

    def test_fit_draws_its_bar(self):
        self.open_control()
        self.check_fit_bar()


class VSCodeTests(Protocol2Case):
    """VS Code: its cell ids, then ipywidgets 7 models (its renderer for non-Python kernels)."""
    metadata = VSCODE_META

    def test_cell_ids_then_widget(self):
        self.assertEqual(self.value("widgets.Ready()"), "true")
        self.assertIn("ipywidgets 7 (widget protocol 2.0.0)", self.value("widgets.FrontendSeen()"))
        pub = self.run_ok("p := widgets.NewIntProgress(0, 10)\np.Display()\np.SetValue(3)")
        pid = self.check_models(pub, "2.0.0", "1.5.0", "1.2.0")
        # An update reaches Go; ipywidgets 7 has no echo_update.
        _, pub = self.comm_msg(pid, {"method": "update", "state": {"value": 9}, "buffer_paths": []})
        self.assertEqual(self.comm_msgs(pub, pid), [])
        self.assertEqual(self.value("p.Value()"), "9")

    def test_fit_draws_its_bar(self):
        self.check_fit_bar()


class SilentFrontEndTests(Protocol2Case):
    """A front end that shows nothing (nbconvert, console): ipywidgets 7 models, text Fit."""

    def test_widget_has_text_fallback_and_fit_is_text(self):
        self.assertEqual(self.value("widgets.Ready()"), "false")
        pub = self.run_ok("p := widgets.NewIntProgress(0, 10)\np.Display()\np.SetValue(3)")
        self.check_models(pub, "2.0.0", "1.5.0", "1.2.0")
        pub = self.run_ok(FIT)
        self.assertEqual(self.opens(pub), {})
        shown = [m["content"]["data"] for m in pub if m["msg_type"] in ("display_data", "update_display_data")]
        self.assertTrue(shown)
        self.assertIn("Epoch 2/2", shown[-1]["text/plain"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
