"""jupyter_kernel_test conformance suite for the godist kernel, with a Go sample for every
attribute the suite supports. Run by cmd/godist's integration test with the kernelspec
installed in a temporary JUPYTER_DATA_DIR."""
import unittest

import jupyter_kernel_test as jkt

IMPORTS = 'import (\n\t"fmt"\n\t"os"\n\t"godist/distlib/display"\n)'


class GodistKernelTests(jkt.KernelTests):
    kernel_name = "godist"
    language_name = "go"
    file_extension = ".go"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The samples below use these packages; a notebook's first cell imports them too.
        msg_id = cls.kc.execute(IMPORTS)
        while True:
            reply = cls.kc.get_shell_msg(timeout=60)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        assert reply["content"]["status"] == "ok", reply["content"]

    code_hello_world = 'fmt.Println("hello, world")'
    code_stderr = 'fmt.Fprintln(os.Stderr, "to stderr")'
    completion_samples = [
        {"text": "fmt.Print", "matches": {"Print", "Printf", "Println"}},
        {"text": "os.Std", "matches": {"Stderr", "Stdin", "Stdout"}},
        # The cell's own import and declarations count before it runs.
        {"text": 'import "strings"\nstrings.ToUpp', "matches": {"ToUpper", "ToUpperSpecial"}},
        {"text": "func squareOf(x int) int { return x * x }\nsquareO", "matches": {"squareOf"}},
    ]
    complete_code_samples = ["x := 1", 'fmt.Println("hi")', "func f() int { return 1 }"]
    incomplete_code_samples = ["func f() {", "x := []int{1,\n", "for i := 0; i < 3; i++ {"]
    invalid_code_samples = ["}", "x := 1 }", "a := 1 @", "x := := 1", "x := 1 +* 2"]
    code_page_something = "fmt.Println?"
    code_generate_error = 'panic("boom")'
    code_execute_result = [
        {"code": "6*7", "result": "42"},
        {"code": '"go" + "pher"', "result": "gopher"},
    ]
    code_display_data = [
        {"code": 'display.HTML("<b>hi</b>")', "mime": "text/html"},
        {"code": 'display.Markdown("*hi*")', "mime": "text/markdown"},
    ]
    code_history_pattern = "6*7"
    supported_history_operations = ("tail", "range", "search")
    code_inspect_sample = "fmt.Println"
    code_clear_output = "display.ClearOutput(false)"


if __name__ == "__main__":
    unittest.main(verbosity=2)
