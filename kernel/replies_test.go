package kernel

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestRepliesJSON pins the JSON of every message content type: the keys, and {} or []
// (never null) where the spec has an object or a list.
func TestRepliesJSON(t *testing.T) {
	indent := "    "
	tests := []struct {
		name    string
		content any
		want    string
	}{
		{"status", statusContent{ExecutionState: "busy"}, `{"execution_state":"busy"}`},
		{"kernel_info_reply", kernelInfoReply{Status: "ok", ProtocolVersion: "5.3", Implementation: "godist",
			ImplementationVersion: "1", LanguageInfo: languageInfo{Name: "go", Version: "1.26", Mimetype: "text/x-go",
				FileExtension: ".go", CodemirrorMode: "go", PygmentsLexer: "go"}, Banner: "b", HelpLinks: []HelpLink{}},
			`{"status":"ok","protocol_version":"5.3","implementation":"godist","implementation_version":"1",
			 "language_info":{"name":"go","version":"1.26","mimetype":"text/x-go","file_extension":".go","codemirror_mode":"go","pygments_lexer":"go"},
			 "banner":"b","help_links":[],"debugger":false}`},
		{"interrupt_reply", statusReply{Status: "ok"}, `{"status":"ok"}`},
		{"shutdown_reply", shutdownReply{Status: "ok", Restart: true}, `{"status":"ok","restart":true}`},
		{"connect_reply", connectReply{Status: "ok", ShellPort: 1, IOPubPort: 2, StdinPort: 3, HBPort: 4, ControlPort: 5},
			`{"status":"ok","shell_port":1,"iopub_port":2,"stdin_port":3,"hb_port":4,"control_port":5}`},
		{"execute_input", executeInput{Code: "x", ExecutionCount: 2}, `{"code":"x","execution_count":2}`},
		{"execute_result", executeResult{ExecutionCount: 2, Data: map[string]any{"text/plain": "1"}, Metadata: orMap(nil)},
			`{"execution_count":2,"data":{"text/plain":"1"},"metadata":{}}`},
		{"error", (&ExecError{Name: "E", Value: "v", Traceback: []string{"E: v"}}).content(),
			`{"ename":"E","evalue":"v","traceback":["E: v"]}`},
		{"execute_reply ok", executeOKReply(3, nil, nil),
			`{"status":"ok","execution_count":3,"user_expressions":{},"payload":[]}`},
		{"execute_reply ok, page", executeOKReply(3, map[string]userExpression{
			"a": {Status: "ok", mimeBundle: &mimeBundle{Data: map[string]any{}, Metadata: map[string]any{}}},
			"b": {Status: "error", errorContent: (&ExecError{Name: "E", Value: "v"}).content()},
		}, []pagePayload{{Source: "page", Data: map[string]any{"text/plain": "doc"}}}),
			`{"status":"ok","execution_count":3,
			 "user_expressions":{"a":{"status":"ok","data":{},"metadata":{}},"b":{"status":"error","ename":"E","evalue":"v","traceback":[]}},
			 "payload":[{"source":"page","data":{"text/plain":"doc"},"start":0}]}`},
		{"execute_reply error", executeErrorReply(4, &ExecError{Name: "ExecutionAborted", Value: "not executed"}),
			`{"status":"error","execution_count":4,"ename":"ExecutionAborted","evalue":"not executed","traceback":[],"user_expressions":{},"payload":[]}`},
		{"complete_reply", completeReply{Status: "ok", Matches: []string{"Print"}, CursorStart: 5, CursorEnd: 8},
			`{"status":"ok","matches":["Print"],"cursor_start":5,"cursor_end":8,"metadata":{}}`},
		{"inspect_reply", inspectReply{Status: "ok", Found: false, Data: orMap(nil)},
			`{"status":"ok","found":false,"data":{},"metadata":{}}`},
		{"is_complete_reply", isCompleteReply{Status: "complete"}, `{"status":"complete"}`},
		{"is_complete_reply incomplete", isCompleteReply{Status: "incomplete", Indent: &indent},
			`{"status":"incomplete","indent":"    "}`},
		{"history_reply", historyReply{Status: "ok", History: []any{[]any{0, 1, "x"}}}, `{"status":"ok","history":[[0,1,"x"]]}`},
		{"history_reply error", newErrorReply(&ExecError{Name: "BadRequest", Value: "v"}),
			`{"status":"error","ename":"BadRequest","evalue":"v","traceback":[]}`},
		{"comm_info_reply", commInfoReply{Status: "ok", Comms: map[string]commInfo{"id": {TargetName: "t"}}},
			`{"status":"ok","comms":{"id":{"target_name":"t"}}}`},
		{"comm_open", commOpen{CommID: "id", TargetName: "t", Data: orMap(nil)}, `{"comm_id":"id","target_name":"t","data":{}}`},
		{"comm_msg", commData{CommID: "id", Data: map[string]any{"a": 1}}, `{"comm_id":"id","data":{"a":1}}`},
		{"stream", streamContent{Name: "stdout", Text: "hi"}, `{"name":"stdout","text":"hi"}`},
		{"display_data", displayData{Data: orMap(nil), Metadata: orMap(nil)}, `{"data":{},"metadata":{},"transient":{}}`},
		{"update_display_data", displayData{Data: orMap(nil), Metadata: orMap(nil), Transient: transient{DisplayID: "d"}},
			`{"data":{},"metadata":{},"transient":{"display_id":"d"}}`},
		{"clear_output", clearOutput{Wait: true}, `{"wait":true}`},
		{"input_request", inputRequest{Prompt: "?", Password: false}, `{"prompt":"?","password":false}`},
	}
	for _, tt := range tests {
		raw, err := json.Marshal(tt.content)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var got, want any
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
			t.Fatalf("%s: bad want: %v", tt.name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %s\nwant %s", tt.name, raw, tt.want)
		}
	}
}
