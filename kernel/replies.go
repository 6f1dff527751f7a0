package kernel

// This file holds the content of every message the kernel sends, one type per message,
// with the field names of the Jupyter messaging spec (5.3). Maps stay only where the
// spec's value is open: MIME bundles, metadata a cell gives, user expressions by name.

// emptyObject is a field the spec requires that the kernel leaves empty: it encodes as {}.
type emptyObject struct{}

// errorContent is a cell's error: the iopub "error" message, and the fields that an error
// reply adds to its status.
type errorContent struct {
	Ename     string   `json:"ename"`
	Evalue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// content returns the error as the protocol carries it; a nil traceback is sent as [].
func (e *ExecError) content() *errorContent {
	tb := e.Traceback
	if tb == nil {
		tb = []string{}
	}
	return &errorContent{Ename: e.Name, Evalue: e.Value, Traceback: tb}
}

// errorReply is the reply of a request that failed: {"status": "error", ename, evalue,
// traceback}.
type errorReply struct {
	Status string `json:"status"`
	*errorContent
}

func newErrorReply(ee *ExecError) errorReply {
	return errorReply{Status: "error", errorContent: ee.content()}
}

// statusContent is iopub's status message: busy or idle.
type statusContent struct {
	ExecutionState string `json:"execution_state"`
}

// kernelInfoReply answers kernel_info_request.
type kernelInfoReply struct {
	Status                string       `json:"status"`
	ProtocolVersion       string       `json:"protocol_version"`
	Implementation        string       `json:"implementation"`
	ImplementationVersion string       `json:"implementation_version"`
	LanguageInfo          languageInfo `json:"language_info"`
	Banner                string       `json:"banner"`
	HelpLinks             []HelpLink   `json:"help_links"`
	Debugger              bool         `json:"debugger"`
}

type languageInfo struct {
	Name           string `json:"name"`
	Version        string `json:"version"`
	Mimetype       string `json:"mimetype"`
	FileExtension  string `json:"file_extension"`
	CodemirrorMode string `json:"codemirror_mode"`
	PygmentsLexer  string `json:"pygments_lexer"`
}

// statusReply is a reply that only says it succeeded: interrupt_reply.
type statusReply struct {
	Status string `json:"status"`
}

// shutdownReply answers shutdown_request, on its channel and on iopub.
type shutdownReply struct {
	Status  string `json:"status"`
	Restart bool   `json:"restart"`
}

// connectReply answers the (deprecated) connect_request with the bound ports.
type connectReply struct {
	Status      string `json:"status"`
	ShellPort   int    `json:"shell_port"`
	IOPubPort   int    `json:"iopub_port"`
	StdinPort   int    `json:"stdin_port"`
	HBPort      int    `json:"hb_port"`
	ControlPort int    `json:"control_port"`
}

// executeInput is iopub's execute_input: the code a cell runs, with its count.
type executeInput struct {
	Code           string `json:"code"`
	ExecutionCount int    `json:"execution_count"`
}

// executeResult is iopub's execute_result: the value of a cell's final expression.
type executeResult struct {
	ExecutionCount int            `json:"execution_count"`
	Data           map[string]any `json:"data"`
	Metadata       map[string]any `json:"metadata"`
}

// executeReply answers execute_request. An error reply (errorContent set) is built by
// executeErrorReply only.
type executeReply struct {
	Status         string `json:"status"`
	ExecutionCount int    `json:"execution_count"`
	*errorContent
	UserExpressions map[string]userExpression `json:"user_expressions"`
	Payload         []pagePayload             `json:"payload"`
}

// executeOKReply is the reply of a cell that ran.
func executeOKReply(count int, userExpr map[string]userExpression, payload []pagePayload) executeReply {
	if userExpr == nil {
		userExpr = map[string]userExpression{}
	}
	if payload == nil {
		payload = []pagePayload{}
	}
	return executeReply{Status: "ok", ExecutionCount: count, UserExpressions: userExpr, Payload: payload}
}

// executeErrorReply is the reply of a cell that failed, or was not run.
func executeErrorReply(count int, ee *ExecError) executeReply {
	return executeReply{Status: "error", ExecutionCount: count, errorContent: ee.content(),
		UserExpressions: map[string]userExpression{}, Payload: []pagePayload{}}
}

// userExpression is the value of one of an execute_request's user_expressions: a MIME
// bundle, or an error.
type userExpression struct {
	Status string `json:"status"`
	*errorContent
	*mimeBundle
}

// mimeBundle is data in several MIME types with its metadata.
type mimeBundle struct {
	Data     map[string]any `json:"data"`
	Metadata map[string]any `json:"metadata"`
}

// pagePayload asks the front end to show data in its pager (the help syntax "name?").
type pagePayload struct {
	Source string         `json:"source"` // "page"
	Data   map[string]any `json:"data"`
	Start  int            `json:"start"`
}

// completeReply answers complete_request; the cursors are code point offsets.
type completeReply struct {
	Status      string      `json:"status"`
	Matches     []string    `json:"matches"`
	CursorStart int         `json:"cursor_start"`
	CursorEnd   int         `json:"cursor_end"`
	Metadata    emptyObject `json:"metadata"`
}

// inspectReply answers inspect_request.
type inspectReply struct {
	Status   string         `json:"status"`
	Found    bool           `json:"found"`
	Data     map[string]any `json:"data"`
	Metadata emptyObject    `json:"metadata"`
}

// isCompleteReply answers is_complete_request; indent is sent for incomplete code only.
type isCompleteReply struct {
	Status string  `json:"status"`
	Indent *string `json:"indent,omitempty"`
}

// historyReply answers history_request. Each entry is the tuple [session, line, input],
// or [session, line, [input, output]] when the request asked for output.
type historyReply struct {
	Status  string `json:"status"`
	History []any  `json:"history"`
}

// commInfoReply answers comm_info_request: the open comms by id.
type commInfoReply struct {
	Status string              `json:"status"`
	Comms  map[string]commInfo `json:"comms"`
}

type commInfo struct {
	TargetName string `json:"target_name"`
}

// commOpen is the comm_open the kernel sends for a comm it opens.
type commOpen struct {
	CommID     string         `json:"comm_id"`
	TargetName string         `json:"target_name"`
	Data       map[string]any `json:"data"`
}

// commData is the content of comm_msg and comm_close.
type commData struct {
	CommID string         `json:"comm_id"`
	Data   map[string]any `json:"data"`
}

// streamContent is iopub's stream: text a cell wrote to stdout or stderr.
type streamContent struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// displayData is iopub's display_data and update_display_data.
type displayData struct {
	Data      map[string]any `json:"data"`
	Metadata  map[string]any `json:"metadata"`
	Transient transient      `json:"transient"`
}

// transient holds what the front end must not store: the display id, when there is one.
type transient struct {
	DisplayID string `json:"display_id,omitempty"`
}

// clearOutput is iopub's clear_output.
type clearOutput struct {
	Wait bool `json:"wait"`
}

// inputRequest is stdin's input_request.
type inputRequest struct {
	Prompt   string `json:"prompt"`
	Password bool   `json:"password"`
}

// orMap returns m, or an empty map for nil: the spec's objects are never null.
func orMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
