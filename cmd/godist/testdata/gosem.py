"""Issue 12, "Go semantics": cells that must behave as Go 1.22+ does, through jupyter_client."""
import unittest

from kernelcase import KernelCase


class GoSemanticsTests(KernelCase):
    def test_top_level_defer_runs_once_at_the_end_of_its_cell(self):
        self.ok('import "fmt"')
        out, _ = self.ok('defer fmt.Println("deferred")\nfmt.Println("body")')
        self.assertEqual(out, "body\ndeferred\n")
        out, result = self.ok("1 + 1")
        self.assertEqual((out, result), ("", "2"))

    def test_loop_variables_are_per_iteration(self):
        self.ok('import "fmt"')
        out, _ = self.ok("for i := 0; i < 3; i++ { defer fmt.Print(i) }")
        self.assertEqual(out, "210")
        _, result = self.ok("fs := []func() int{}\n"
                            "for i := 0; i < 3; i++ { fs = append(fs, func() int { return i }) }\n"
                            "fs[0]()+fs[1]()*10+fs[2]()*100")
        self.assertEqual(result, "210")

    def test_two_values_are_shown(self):
        self.ok('import "strconv"')
        self.assertEqual(self.ok('strconv.Atoi("12")')[1], "(12, <nil>)")

    def test_nil_error_of_a_display_call_shows_nothing(self):
        self.ok('import "godist/distlib/display"')
        reply, pub = self.execute('display.JSON(map[string]int{"a": 1})')
        self.assertEqual(reply["content"]["status"], "ok", reply["content"])
        kinds = [m["msg_type"] for m in pub]
        self.assertIn("display_data", kinds)
        self.assertNotIn("execute_result", kinds)

    def test_index_panic_reads_like_go(self):
        err, tb = self.fails("s := []int{1, 2, 3}\ns[5]")
        self.assertIn("index out of range [5] with length 3", err)
        self.assertIn("line 2", tb)


if __name__ == "__main__":
    unittest.main(verbosity=2)
