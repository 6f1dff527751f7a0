// Package doccheck holds no code: its test reads the project's documents (every Markdown
// file outside third_party and bench/RESULTS.md, and every package's doc comment) and checks
// that what they name exists: build tags, make targets and variables, files and directories,
// environment variables, godist subcommands, test functions, Go modules, and the project's
// Go names (pkg.Name, pkg.Type.Method). Run it with go test ./internal/doccheck; a failure
// names the document, the line and the missing thing.
package doccheck
