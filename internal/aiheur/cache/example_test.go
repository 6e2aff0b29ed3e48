package cache_test

import (
	"fmt"

	"miotool/internal/aiheur/cache"
)

type model struct{ name string }

func (m *model) Release() bool { return true }

// How a scenario uses the detection: each worker names itself, holds the
// model while it predicts, and the scenario declares a barrier where it
// has joined its workers; at the end it reads the detections. The first
// record of each kind is also handed over as it is made, so that a process
// about to crash can print it first.
func Example_detection() {
	records := cache.NewRecords(func(r cache.Record) { fmt.Println("first record:", r.Kind) })
	c, err := cache.New[cache.SetKey, *model](cache.Unlocked, cache.Options{Name: "TunaNet", Records: records})
	if err != nil {
		panic(err)
	}
	worker := func(name, arch string) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			cache.NameThread(name)
			h, err := c.Hold(cache.SetKey{Arch: arch}, func() (*model, error) { return &model{arch}, nil })
			if err != nil {
				panic(err)
			}
			defer h.Done()
			_ = h.Model.name // predict with the model
		}()
		<-done // joined: but only the Barrier below tells the cache so
	}

	worker("thread 1", "gfx942")
	c.Barrier()
	worker("thread 2", "gfx942") // reads what thread 1 wrote, after a barrier
	fmt.Println(records.Detections())
	worker("thread 3", "gfx90a") // writes the map thread 2 read, with no barrier between
	d := records.Detections()
	fmt.Println(d)
	fmt.Println(d.Races.First.Thread.Name, d.Races.First.Access, "after", d.Races.First.Other.Name, d.Races.First.OtherAccess)
	// Output:
	// use-after-free 0, published model destroyed 0, races 0
	// first record: race
	// use-after-free 0, published model destroyed 0, races 1
	// thread 3 write after thread 2 read
}
