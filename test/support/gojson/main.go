// Reads a JSON array of documents on stdin and prints, one per line, what Go's encoding/json
// produces for each after decoding it into interface{}: the bytes a Go webhook would inline.
package main

import (
	"bufio"
	"encoding/json"
	"os"
)

func main() {
	var docs []json.RawMessage
	if err := json.NewDecoder(os.Stdin).Decode(&docs); err != nil {
		panic(err)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for _, doc := range docs {
		var value interface{}
		if err := json.Unmarshal(doc, &value); err != nil {
			panic(err)
		}
		encoded, err := json.Marshal(value)
		if err != nil {
			panic(err)
		}
		out.Write(encoded)
		out.WriteString("\n")
	}
}
