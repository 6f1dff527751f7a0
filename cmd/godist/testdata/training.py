"""Interrupting training through jupyter_client: a long model.Fit stops at the next step,
the reply comes within 1 s, the kernel goes back to idle (no CPU, no goroutines left, no
more progress updates), and the model, optimizer and strategy keep working in the next
cells. Also a custom loop (strategy.Run), a %%distributed Fit and a ClusterCoordinator loop
interrupted the same way."""
import os
import time
import unittest

from kernelcase import KernelCase

TIMEOUT = 120

SETUP = '''import (
    "fmt"
    "runtime"
    "godist/distlib/data"
    "godist/distlib/device"
    "godist/distlib/distribute"
    "godist/distlib/keras"
    "godist/distlib/keras/layers"
    "godist/distlib/tensor"
)
device.SetLogicalDeviceConfiguration(device.ListPhysicalDevices("CPU")[0], make([]device.LogicalDeviceConfiguration, 2))
strategy := distribute.NewMirroredStrategy()
x := tensor.RandomNormal([]int{2048, 32}, 0, 1, 1)
y := tensor.ReduceSum(x, 1)
ds := data.FromTensorSlices(x, y).Batch(64, false)
var model *keras.Model
strategy.Scope(func() {
    model = keras.Sequential(layers.Dense(64, layers.ReLU, layers.InputShape(32)), layers.Dense(1))
    model.Compile(keras.Adam(1e-3), keras.MeanSquaredError())
})
fmt.Println("goroutines", runtime.NumGoroutine())
'''


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class TrainingCase(KernelCase):
    """KernelCase with the kernel's pid, waits as long as training takes, and run_ok."""

    def setUp(self):
        super().setUp()
        self.pid = self.km.provisioner.process.pid

    def reply_to(self, msg_id, timeout=TIMEOUT):
        return super().reply_to(msg_id, timeout)

    def iopub_until_idle(self, msg_id, timeout=TIMEOUT):
        return super().iopub_until_idle(msg_id, timeout)

    def run_ok(self, code):
        """Runs code, asserts it succeeded, and returns all the text it showed."""
        reply, pub = self.execute(code, TIMEOUT)
        self.assertEqual(reply["content"]["status"], "ok", (code, reply["content"]))
        return text_of(pub)

    def goroutines(self):
        out = self.run_ok('fmt.Println("goroutines", runtime.NumGoroutine())')
        return int(out.split("goroutines")[-1].split()[0])

    def interrupt_after(self, code, seconds):
        msg_id = self.kc.execute(code)
        time.sleep(seconds)
        started = time.time()
        self.km.interrupt_kernel()
        reply = self.reply_to(msg_id, timeout=10)
        elapsed = time.time() - started
        pub = self.iopub_until_idle(msg_id)
        self.assertEqual(reply["content"]["status"], "error", reply["content"])
        self.assertEqual(reply["content"]["ename"], "Interrupted", reply["content"])
        self.assertLess(elapsed, 1.0, "the interrupted cell took %.2fs to reply" % elapsed)
        return pub

    def check_quiet(self, before):
        # No more output of any kind for the interrupted cell, and the kernel is idle.
        time.sleep(2)
        c0 = cpu_seconds(self.pid)
        time.sleep(1)
        used = cpu_seconds(self.pid) - c0
        self.assertLess(used, 0.15, "the kernel used %.2f CPU-seconds in the second after the interrupt" % used)
        late = []
        while True:
            try:
                late.append(self.kc.get_iopub_msg(timeout=0.2))
            except Exception:
                break
        self.assertEqual([m["msg_type"] for m in late], [], "messages after the interrupted cell went idle")
        after = self.goroutines()
        self.assertLessEqual(after, before + 2, "goroutines: %d before the cell, %d after its interrupt" % (before, after))


class TrainingInterruptTests(TrainingCase):
    def test_fit_interrupted(self):
        before = int(self.run_ok(SETUP).split("goroutines")[-1].split()[0])
        pub = self.interrupt_after("history := model.Fit(ds, keras.Epochs(1000))", 2.0)
        shown = text_of(pub)
        self.assertIn("Fit interrupted in epoch", shown)
        self.check_quiet(before)
        out = self.run_ok('logs := model.Evaluate(ds, keras.Verbose(0))\nfmt.Printf("loss %.3f\\n", logs["loss"])')
        self.assertIn("loss ", out)
        out = self.run_ok('h := model.Fit(ds, keras.Epochs(2), keras.Verbose(0))\nfmt.Println("epochs", len(h.Epoch))')
        self.assertIn("epochs 2", out)

    def test_custom_loop_interrupted(self):
        before = int(self.run_ok(SETUP).split("goroutines")[-1].split()[0])
        loop = '''opt := keras.SGD(0.01)
dist := strategy.ExperimentalDistributeDataset(ds.Repeat(-1))
it := dist.Iterator()
for inputs, ok := it.Next(); ok; inputs, ok = it.Next() {
    strategy.Run(func(ctx *distribute.ReplicaContext, el data.Element) *tensor.Tensor {
        tape := tensor.NewGradientTape()
        loss := distribute.ComputeAverageLoss(keras.MeanSquaredError(keras.WithReduction(keras.ReductionNone)).Call(el[1], model.Call(el[0], true)), 64)
        opt.ApplyGradients(tape.Gradient(loss, model.TrainableVariables()), model.TrainableVariables())
        return loss
    }, inputs)
}'''
        self.interrupt_after(loop, 2.0)
        self.check_quiet(before)
        out = self.run_ok('logs := model.Evaluate(ds, keras.Verbose(0))\nfmt.Printf("loss %.3f\\n", logs["loss"])')
        self.assertIn("loss ", out)


DISTRIBUTED = '''%%distributed --workers 2
import (
    "fmt"
    "godist/distlib/data"
    "godist/distlib/distribute"
    "godist/distlib/keras"
    "godist/distlib/keras/layers"
    "godist/distlib/tensor"
)
strategy := distribute.NewMultiWorkerMirroredStrategy()
x := tensor.RandomNormal([]int{2048, 32}, 0, 1, 1)
y := tensor.ReduceSum(x, 1)
ds := data.FromTensorSlices(x, y).Batch(64, false).WithOptions(data.Options{AutoShardPolicy: data.AutoShardData})
var model *keras.Model
strategy.Scope(func() {
    model = keras.Sequential(layers.Dense(64, layers.ReLU, layers.InputShape(32)), layers.Dense(1))
    model.Compile(keras.Adam(1e-3), keras.MeanSquaredError())
})
fmt.Println("training")
model.Fit(ds, keras.Epochs(100000), keras.Verbose(2))
'''


def worker_pids(parent):
    """The godist worker-cell processes whose parent is the kernel."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if ppid == parent and b"worker-cell" in cmd:
            pids.append(int(d))
    return pids


class DistributedInterruptTests(TrainingCase):
    def test_distributed_fit_interrupted(self):
        msg_id = self.kc.execute(DISTRIBUTED)
        deadline, seen = time.time() + 90, ""
        while "Epoch 2/" not in seen:
            self.assertLess(time.time(), deadline, "the workers did not train:\n" + seen)
            m = self.kc.get_iopub_msg(timeout=90)
            if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "stream":
                seen += m["content"]["text"]
        self.assertEqual(len(worker_pids(self.pid)), 2, "want 2 worker processes while training")
        started = time.time()
        self.km.interrupt_kernel()
        reply = self.reply_to(msg_id, timeout=10)
        elapsed = time.time() - started
        self.iopub_until_idle(msg_id)
        self.assertEqual(reply["content"]["status"], "error", reply["content"])
        self.assertLess(elapsed, 2.0, "the interrupted %%%%distributed cell took %.2fs to reply" % elapsed)
        deadline = time.time() + 5
        while worker_pids(self.pid) and time.time() < deadline:
            time.sleep(0.1)
        self.assertEqual(worker_pids(self.pid), [], "worker processes left after the interrupt")
        time.sleep(1)
        c0 = cpu_seconds(self.pid)
        time.sleep(1)
        self.assertLess(cpu_seconds(self.pid) - c0, 0.15, "the kernel is busy after the interrupt")
        reply, _ = self.reply_to(self.kc.execute("1 + 1")), None
        self.assertEqual(reply["content"]["status"], "ok")


COORDINATOR = '''import (
    "net"
    "time"
    "godist/distlib/cluster"
)
lis, _ := net.Listen("tcp", "127.0.0.1:0")
psSpec, _ := cluster.NewClusterSpec(map[string][]string{"ps": {lis.Addr().String()}})
psResolver, _ := cluster.NewSimpleClusterResolver(psSpec, "ps", 0, "grpc")
psServer, err := distribute.ServeParameterServer(psResolver, lis, distribute.WithClusterToken("t"))
if err != nil {
    panic(err)
}
spec, _ := cluster.NewClusterSpec(map[string][]string{"chief": {"127.0.0.1:1"}, "worker": {"127.0.0.1:2", "127.0.0.1:3"}, "ps": {lis.Addr().String()}})
resolver, _ := cluster.NewSimpleClusterResolver(spec, "chief", 0, "grpc")
psStrategy := distribute.NewParameterServerStrategy(resolver, distribute.WithClusterToken("t"))
coordinator := distribute.NewClusterCoordinator(psStrategy)
counter := psStrategy.NewVariable("counter", tensor.Scalar(0), false)
step := func(w *distribute.WorkerContext) (*tensor.Tensor, error) {
    time.Sleep(20 * time.Millisecond)
    return nil, w.AssignAdd(counter, tensor.Scalar(1))
}
fmt.Println("goroutines", runtime.NumGoroutine())
'''


class CoordinatorInterruptTests(TrainingCase):
    def test_coordinator_loop_interrupted(self):
        self.run_ok(SETUP)
        self.run_ok(COORDINATOR)
        self.run_ok("for i := 0; i < 4; i++ { coordinator.Schedule(step) }\nif err := coordinator.Join(); err != nil { panic(err) }")
        base = self.goroutines()
        msg_id = self.kc.execute("for i := 0; i < 100000; i++ {\n    coordinator.Schedule(step)\n}\ncoordinator.Join()")
        time.sleep(3)
        started = time.time()
        self.km.interrupt_kernel()
        reply = self.reply_to(msg_id, timeout=10)
        elapsed = time.time() - started
        self.iopub_until_idle(msg_id)
        self.assertEqual(reply["content"]["status"], "error", reply["content"])
        self.assertLess(elapsed, 1.0, "the interrupted coordinator loop took %.2fs to reply" % elapsed)
        time.sleep(2)
        c0 = cpu_seconds(self.pid)
        time.sleep(1)
        self.assertLess(cpu_seconds(self.pid) - c0, 0.15, "the kernel is busy after the interrupt: steps still run")
        before = float(self.run_ok("fmt.Println(counter.Value().Item())").split()[-1])
        time.sleep(1)
        after = float(self.run_ok("fmt.Println(counter.Value().Item())").split()[-1])
        self.assertEqual(before, after, "steps went on running after the interrupt")
        self.assertLessEqual(self.goroutines(), base + 3, "goroutines left after the interrupt")
        # The coordinator keeps working in the next cell.
        out = self.run_ok("for i := 0; i < 10; i++ { coordinator.Schedule(step) }\n"
                           "if err := coordinator.Join(); err != nil { panic(err) }\n"
                           "fmt.Println(\"counter\", counter.Value().Item())")
        self.assertEqual(float(out.split("counter")[-1].split()[0]), after + 10, out)


def text_of(pub):
    parts = []
    for m in pub:
        c = m["content"]
        if m["msg_type"] == "stream":
            parts.append(c["text"])
        elif m["msg_type"] in ("display_data", "update_display_data", "execute_result"):
            parts.append(c["data"].get("text/plain", ""))
        elif m["msg_type"] == "error":
            parts.append("\n".join(c["traceback"]))
    return "\n".join(parts)


if __name__ == "__main__":
    unittest.main(verbosity=2)
