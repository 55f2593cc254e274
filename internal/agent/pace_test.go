package agent

import (
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestCommitPacing: on a fake clock, with the loop's steps called in turn, the first change after
// a quiet period commits at once; changes that keep coming within the commit interval wait and
// are committed together by the pacer's one commit; a change after the next quiet period
// commits at once again.
func TestCommitPacing(t *testing.T) {
	d := &fakeProgrammer{applied: make(chan struct{}, 16), resynced: make(chan struct{}, 16)}
	l := newLoop(Config{CommitInterval: 15 * time.Millisecond}, &fakeCalc{}, d)
	defer l.stop()
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	none := make(chan []model.Update)
	send := func(what string, wantApplies int, wantWaiting bool) {
		t.Helper()
		l.handleBatch([]model.Update{model.EndpointSet{}}, none)
		if d.applies != wantApplies || l.waiting != wantWaiting {
			t.Fatalf("%s: %d applies, waiting %v; want %d, %v", what, d.applies, l.waiting, wantApplies, wantWaiting)
		}
	}

	l.handleBatch([]model.Update{model.SyncStatusUpdate{Status: model.InSync}}, none)
	if d.applies != 1 || !l.committed {
		t.Fatalf("the first full commit: %d applies, committed %v", d.applies, l.committed)
	}
	now = now.Add(time.Second)
	send("a lone change after a quiet second", 2, false)
	now = now.Add(5 * time.Millisecond)
	send("a change 5 ms later", 2, true)
	now = now.Add(5 * time.Millisecond)
	send("another 5 ms later", 2, true)
	if got := l.pace.delay(now); got != 5*time.Millisecond {
		t.Errorf("the waiting changes' commit is %v away, want 5ms", got)
	}
	now = now.Add(5 * time.Millisecond)
	messages := d.messages
	l.commitWaiting() // the pace timer fires
	if d.applies != 3 || l.waiting || d.messages != messages+1 {
		t.Fatalf("the paced commit: %d applies (%d messages), waiting %v; want 3 applies, the two waiting bursts in one flush, none waiting",
			d.applies, d.messages-messages, l.waiting)
	}
	now = now.Add(15 * time.Millisecond)
	send("a change a full interval after the paced commit", 4, false)

	l.pace.interval = 0 // CommitInterval < 0: never paced
	send("unpaced", 5, false)
}
