package experiments
import ("testing";"fmt")
func TestDemo(t *testing.T){ _, err := LoadConfig("/tmp/cfgdemo/bad.json"); fmt.Println(err) }
