use super::*;

#[test]
fn versions_skip_a_zero_low_half() {
    let mut vs = Versions::starting_at(u32::MAX - 1);
    assert_eq!(vs.full_version(), u64::from(u32::MAX - 1));
    assert_eq!(vs.pending(), u32::MAX);
    assert_eq!(vs.publish(), u32::MAX);
    assert_eq!(vs.pending(), 1);
    assert_eq!(vs.publish_full(), (1 << 32) + 1);
    assert_eq!(vs.version(), 1);
}

#[test]
fn barrier_counts_parked_and_gone_readers_but_not_unparking_ones() {
    let mut vs = Versions::new();
    let w = vs.watch();
    let mut a = vs.reader();
    let mut b = vs.reader();
    let v = vs.publish_full();
    assert!(!w.caught_up(v));
    assert!(!w.barrier(v, Duration::from_millis(5)));
    a.refresh();
    assert!(!w.caught_up(v), "b still reads the version before");
    b.park();
    assert!(w.caught_up(v));
    assert_eq!(w.readers(), (2, 1));
    let v2 = vs.publish_full();
    // The moment between the two stores of an unpark.
    b.ack.word.store(UNPARKING | v, Ordering::SeqCst);
    assert!(!w.caught_up(v2) && !w.caught_up(0));
    assert_eq!(w.oldest_in_use(), None);
    b.parked = true;
    b.refresh();
    assert_eq!(b.full_version(), v2);
    assert!(!w.caught_up(v2), "a still at v");
    drop(a);
    assert!(w.barrier(v2, Duration::ZERO));
    assert_eq!(w.oldest_in_use(), Some(v2));
}

#[test]
fn a_barrier_sleeps_until_a_reader_moves() {
    let mut vs = Versions::new();
    let w = vs.watch();
    let mut r = vs.reader();
    let v = vs.publish_full();
    let waiter = std::thread::spawn(move || {
        let t = Instant::now();
        (w.barrier(v, Duration::from_secs(60)), t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(50));
    assert!(r.stale());
    r.refresh();
    assert!(!r.stale());
    let (ok, waited) = waiter.join().unwrap();
    assert!(ok);
    // Woken by the reader, not by the timeout (the bound is generous
    // for a loaded machine).
    assert!(waited < Duration::from_secs(30), "{waited:?}");
}

#[test]
// 256 registrations, each searching the ids in use: minutes under Miri,
// and no unsafe code of its own.
#[cfg_attr(miri, ignore)]
fn readers_past_the_255th_get_id_0_and_own_no_line() {
    let mut vs = Versions::new();
    let mut t = super::super::Table::new(&vs, 1);
    t.insert(&[1], 1, 1, [1, 1]);
    vs.publish();
    let mut readers: Vec<Reader> = (0..256).map(|_| vs.reader()).collect();
    assert_eq!(readers[254].id(), 255);
    let last = readers.last_mut().unwrap();
    assert_eq!(last.id(), 0, "no panic, no id");
    last.refresh();
    let view = t.view();
    let hit = view.lookup(last, &[1]).unwrap();
    assert!(!last.count(&hit, 1, 64), "id 0 counts elsewhere");
    // An id freed by a reader that goes is given again.
    readers.remove(3);
    assert_eq!(vs.reader().id(), 4);
}
