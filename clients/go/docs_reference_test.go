package leaseclient

// docs/clients.md's Go reference says what is: every method its tables
// name exists with the results given, every field with its type, and the
// defaults it states are the package's.

import (
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func goReferenceSection(t *testing.T) string {
	b, err := os.ReadFile("../../docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## Go\n")
	if i < 0 {
		t.Fatal("docs/clients.md has no ## Go section")
	}
	return s[i:]
}

type docTable struct {
	kind string // the first header cell: method, field, name
	rows [][]string
}

// docTables: the tables under each "#### `Name`" (or "#### Name") heading.
func docTables(section string) map[string][]docTable {
	out := map[string][]docTable{}
	parts := strings.Split(section, "\n#### ")
	for _, part := range parts[1:] {
		heading := strings.Trim(strings.SplitN(part, "\n", 2)[0], " `")
		body := strings.SplitN(part, "\n### ", 2)[0]
		var cur *docTable
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, "|") {
				cur = nil
				continue
			}
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			switch {
			case cur == nil:
				out[heading] = append(out[heading], docTable{kind: cells[0]})
				cur = &out[heading][len(out[heading])-1]
			case strings.HasPrefix(cells[0], "---"):
			default:
				cur.rows = append(cur.rows, cells)
			}
		}
	}
	return out
}

var docName = regexp.MustCompile("^`([A-Za-z_][A-Za-z0-9_]*)")

func typeName(t reflect.Type) string { return strings.ReplaceAll(t.String(), "leaseclient.", "") }

func TestDocsReference(t *testing.T) {
	tables := docTables(goReferenceSection(t))
	types := map[string]reflect.Type{"HeldLease": reflect.TypeOf(&HeldLease{}),
		"LostError": reflect.TypeOf(LostError{}), "Error": reflect.TypeOf(Error{}),
		"HoldOptions": reflect.TypeOf(HoldOptions{})}
	checked := 0
	for heading, typ := range types {
		if len(tables[heading]) == 0 {
			t.Fatalf("no #### `%s` reference in docs/clients.md", heading)
		}
		for _, tab := range tables[heading] {
			for _, row := range tab.rows {
				m := docName.FindStringSubmatch(row[0])
				if m == nil {
					t.Fatalf("%s: not a name: %s", heading, row[0])
				}
				doc := strings.Trim(row[1], "`")
				switch tab.kind {
				case "method":
					meth, ok := typ.MethodByName(m[1])
					if !ok {
						t.Fatalf("docs/clients.md names %s.%s, which is not a method", heading, m[1])
					}
					var outs []string
					for i := 0; i < meth.Type.NumOut(); i++ {
						outs = append(outs, typeName(meth.Type.Out(i)))
					}
					if got := strings.Join(outs, ", "); got != doc {
						t.Fatalf("%s.%s returns %s, documented as %s", heading, m[1], got, doc)
					}
				case "field":
					f, ok := typ.FieldByName(m[1])
					if !ok {
						t.Fatalf("docs/clients.md names %s.%s, which is not a field", heading, m[1])
					}
					if got := typeName(f.Type); got != doc {
						t.Fatalf("%s.%s is %s, documented as %s", heading, m[1], got, doc)
					}
				default:
					continue
				}
				checked++
			}
		}
	}
	// fields, not methods: LostError.Reason and Error.ClientMade
	if _, ok := reflect.TypeOf(&LostError{}).MethodByName("Reason"); ok {
		t.Fatal("LostError.Reason is a method")
	}
	if _, ok := reflect.TypeOf(&Error{}).MethodByName("ClientMade"); ok {
		t.Fatal("Error.ClientMade is a method")
	}
	// the defaults table
	number := regexp.MustCompile(`\(([\d ]+) bytes\)`)
	for _, tab := range tables["Defaults"] {
		for _, row := range tab.rows {
			switch strings.Trim(row[0], "`") {
			case "MaxAnswerBytes":
				n, err := strconv.Atoi(strings.ReplaceAll(number.FindStringSubmatch(row[1])[1], " ", ""))
				if err != nil || n != MaxAnswerBytes || MaxAnswerBytes != 8<<20 {
					t.Fatalf("MaxAnswerBytes %d, documented %q", MaxAnswerBytes, row[1])
				}
				checked++
			case "DefaultTimeout":
				if !strings.HasPrefix(row[1], strconv.Itoa(int(DefaultTimeout.Seconds()))+" s") {
					t.Fatalf("DefaultTimeout %v, documented %q", DefaultTimeout, row[1])
				}
				checked++
			case "BatchMax":
				if !strings.HasPrefix(row[1], strconv.Itoa(BatchMax)+" ") {
					t.Fatalf("BatchMax %d, documented %q", BatchMax, row[1])
				}
				checked++
			}
		}
	}
	t.Logf("%d documented names checked", checked)
	if checked < 30 {
		t.Fatalf("only %d documented names found", checked)
	}
}
