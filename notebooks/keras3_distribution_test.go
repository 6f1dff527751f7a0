package notebooks

import "testing"

// checkKeras3Distribution checks the outputs of 07-keras3-distribution.ipynb: DataParallel
// and ModelParallel train the course's MLP on two logical CPU devices, ModelParallel holds
// half of each kernel per device, and both follow the single-device loss curve; activity
// 000's functional-API script, line by line under DataParallel, trains the same model.
func checkKeras3Distribution(t *testing.T, nb *notebook) {
	wantNoErrors(t, nb)
	wantOutput(t, nb, findCell(t, nb, "mesh.ListDevices"), `^devices: 2\n/job:localhost/replica:0/task:0/device:CPU:0\n/job:localhost/replica:0/task:0/device:CPU:1\n$`)
	wantOutput(t, nb, findCell(t, nb, "func getModel"), `^batches per epoch: 8\n$`)
	dp := findCell(t, nb, "mesh.NewDataParallel")
	wantOutput(t, nb, dp, `^<DataParallel device_mesh=<DeviceMesh shape=\(2,\), axis_names=\['batch'\]>>\n`)
	wantOutput(t, nb, dp, `(?s)Epoch 1/3.*loss: .*Epoch 3/3.*loss: `)
	fn := findCell(t, nb, "keras.NewModel(inputs, y)")
	wantOutput(t, nb, fn, `(?s)Epoch 1/3.*loss: .*Epoch 3/3.*loss: .*\nevaluate: loss \d\.\d+\nsame loss curve as the Sequential model: true\n$`)
	mp := findCell(t, nb, "mesh.NewModelParallel")
	wantOutput(t, nb, mp, `^<ModelParallel device_mesh=<DeviceMesh shape=\(1, 2\), axis_names=\['data', 'model'\]>>\n`)
	wantOutput(t, nb, mp, `(?s)Epoch 1/3.*loss: .*Epoch 3/3.*loss: `)
	wantOutput(t, nb, findCell(t, nb, "func showShards"),
		`^d1/kernel \[784 200\] on \S+CPU:0: \[784 100\]\nd1/kernel \[784 200\] on \S+CPU:1: \[784 100\]\n`+
			`d2/kernel \[200 10\] on \S+CPU:0: \[100 10\]\nd2/kernel \[200 10\] on \S+CPU:1: \[100 10\]\n$`)
	wantOutput(t, nb, findCell(t, nb, "same loss curve (relative 1e-5)"), `(?m)^epoch 3  one device \d\.\d+  DataParallel \d\.\d+  ModelParallel \d\.\d+\nsame loss curve \(relative 1e-5\): true\n$`)
}
