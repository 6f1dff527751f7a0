"""Shared helpers for the jupyter_client tests of the godist kernel: a fresh kernel per
test, and execute() returning the reply and the cell's iopub messages."""
import time
import unittest

from jupyter_client.manager import start_new_kernel

TIMEOUT = 30


class KernelCase(unittest.TestCase):
    def setUp(self):
        self.km, self.kc = start_new_kernel(kernel_name="godist", startup_timeout=60)

    def tearDown(self):
        self.kc.stop_channels()
        if self.km.is_alive():
            self.km.shutdown_kernel(now=True)

    def reply_to(self, msg_id, timeout=TIMEOUT):
        deadline = time.time() + timeout
        while True:
            msg = self.kc.get_shell_msg(timeout=max(0.01, deadline - time.time()))
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg

    def iopub_until_idle(self, msg_id, timeout=TIMEOUT):
        out, deadline = [], time.time() + timeout
        while True:
            msg = self.kc.get_iopub_msg(timeout=max(0.01, deadline - time.time()))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            out.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return out

    def execute(self, code, timeout=TIMEOUT, **kw):
        msg_id = self.kc.execute(code, **kw)
        reply = self.reply_to(msg_id, timeout)
        return reply, self.iopub_until_idle(msg_id, timeout)

    def ok(self, code, timeout=TIMEOUT):
        """Runs code, asserts it succeeded, and returns (stdout text, text/plain result or None)."""
        reply, pub = self.execute(code, timeout)
        self.assertEqual(reply["content"]["status"], "ok", "%r: %s" % (code, reply["content"]))
        return texts(pub)

    def fails(self, code, timeout=TIMEOUT):
        """Runs code, asserts it failed, and returns the error's 'ename: evalue' and traceback text."""
        reply, pub = self.execute(code, timeout)
        c = reply["content"]
        self.assertEqual(c["status"], "error", "%r: %s" % (code, c))
        return "%s: %s" % (c["ename"], c["evalue"]), "\n".join(c.get("traceback", []))

    def start(self, code):
        """Sends code and returns its msg_id once the cell runs (execute_input seen)."""
        msg_id = self.kc.execute(code)
        while True:
            m = self.kc.get_iopub_msg(timeout=TIMEOUT)
            if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "execute_input":
                return msg_id


def texts(pub):
    """Returns the stdout text and the text/plain of the execute_result (None if none)."""
    out = "".join(m["content"].get("text", "") for m in pub
                  if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")
    results = [m["content"]["data"].get("text/plain") for m in pub if m["msg_type"] == "execute_result"]
    return out, (results[-1] if results else None)
