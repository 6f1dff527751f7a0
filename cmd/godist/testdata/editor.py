"""Issue 12, "Editor's help": is_complete, completion and inspection of unexecuted cells,
auto-import and password input, through jupyter_client."""
import time
import unittest

from kernelcase import KernelCase, TIMEOUT


class EditorTests(KernelCase):
    def shell(self, method, *args, **kw):
        msg_id = getattr(self.kc, method)(*args, **kw)
        return self.reply_to(msg_id)["content"]

    def test_is_complete(self):
        cases = [
            ("x := := 1", "invalid"),
            ("x := 1 +* 2", "invalid"),
            ("}", "invalid"),
            ("func f() {", "incomplete"),
            ("x := []int{1,\n", "incomplete"),
            ("x := 1 +", "incomplete"),
            ("x := 1", "complete"),
            ('import "fmt"\nfmt.Println(1 * -2)', "complete"),
        ]
        for code, want in cases:
            with self.subTest(code=code):
                self.assertEqual(self.shell("is_complete", code)["status"], want)

    def test_complete_unexecuted_import(self):
        code = 'import "fmt"\nfmt.Printl'
        c = self.shell("complete", code, len(code))
        self.assertEqual(c["status"], "ok")
        self.assertIn("Println", c["matches"])
        self.assertEqual((c["cursor_start"], c["cursor_end"]), (len(code) - len("Printl"), len(code)))

    def test_complete_same_cell_function(self):
        code = "func squareOf(x int) int { return x * x }\ny := squa"
        c = self.shell("complete", code, len(code))
        self.assertIn("squareOf", c["matches"])

    def test_complete_fast(self):
        code = 'import "strings"\nstrings.ToU'
        self.shell("complete", code, len(code))  # warm-up
        times = []
        for _ in range(10):
            start = time.monotonic()
            c = self.shell("complete", code, len(code))
            times.append(time.monotonic() - start)
            self.assertIn("ToUpper", c["matches"])
        times.sort()
        self.assertLess(times[len(times) // 2], 0.1, "complete_request round trips: %s" % times)

    def test_inspect_stdlib(self):
        code = 'import "strings"\nstrings.Repeat'
        c = self.shell("inspect", code, len(code), 0)
        self.assertTrue(c["found"], c)
        text = c["data"]["text/plain"]
        self.assertIn("func Repeat(s string, count int) string", text)
        self.assertIn("Repeat returns a new string", text)
        self.assertNotIn("source:", text)
        more = self.shell("inspect", code, len(code), 1)["data"]["text/plain"]
        self.assertIn("source:", more)
        self.assertGreater(len(more), len(text))

    def test_inspect_session_package(self):
        self.ok('import "strings"')
        c = self.shell("inspect", "strings.Builder", 10, 1)
        self.assertIn("func (b *Builder) WriteString(s string) (int, error)", c["data"]["text/plain"])

    def test_auto_import(self):
        reply, pub = self.execute('fmt.Println("x")')
        self.assertEqual(reply["content"]["status"], "ok", reply["content"])
        streams = [(m["content"]["name"], m["content"]["text"]) for m in pub if m["msg_type"] == "stream"]
        self.assertEqual(streams, [("stdout", "x\n")])
        out, _ = self.ok('fmt.Println(strings.ToUpper("go"))\ndisplay.Text("shown")')
        self.assertEqual(out, "GO\n")

    def test_auto_import_ambiguous(self):
        err, _ = self.fails('t := template.New("t")')
        self.assertIn("template is not imported", err)
        self.assertIn('import "html/template"', err)
        self.assertIn('import "text/template"', err)

    def test_password(self):
        msg_id = self.kc.execute('key, err := display.Password("API key: ")\nfmt.Sprint(len(key), err)', allow_stdin=True)
        req = self.kc.get_stdin_msg(timeout=TIMEOUT)
        self.assertEqual(req["msg_type"], "input_request")
        self.assertEqual(req["parent_header"]["msg_id"], msg_id)
        self.assertEqual(req["content"]["prompt"], "API key: ")
        self.assertIs(req["content"]["password"], True)
        self.kc.input("s3cret")
        reply = self.reply_to(msg_id)
        self.assertEqual(reply["content"]["status"], "ok", reply["content"])
        results = [m["content"]["data"]["text/plain"] for m in self.iopub_until_idle(msg_id)
                   if m["msg_type"] == "execute_result"]
        self.assertEqual(results, ["6 <nil>"])

    def test_input_prompt(self):
        msg_id = self.kc.execute('name, _ := display.Input("name? ")\nname', allow_stdin=True)
        req = self.kc.get_stdin_msg(timeout=TIMEOUT)
        self.assertEqual(req["content"]["prompt"], "name? ")
        self.assertIs(req["content"]["password"], False)
        self.kc.input("Ada")
        reply = self.reply_to(msg_id)
        self.assertEqual(reply["content"]["status"], "ok", reply["content"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
