// Command svc is the one binary of the service: the server (`svc serve`), its
// supervisors and the client.
package main

import (
	"context"
	"os"

	"github.com/svcdns/svc/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}
