//! tern patch: the events an endpoint hands one of its connections, in a
//! queue under a lock of its own.
//!
//! They went through a tokio unbounded channel, whose first block (32
//! slots of a `ConnectionEvent`, 6,688 bytes) is made with the channel: a
//! malloc past glibc's per-thread cache on every new connection, and
//! memory every idle connection kept. A connection rarely has more than
//! a few events waiting (the datagrams of one receive batch), so a deque
//! of four slots serves it.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    task::{Context, Poll, Waker},
};

use crate::ConnectionEvent;

/// Slots a drained queue keeps; a larger one is given back, so an idle
/// connection holds no more than this after a burst.
const KEPT_SLOTS: usize = 4;

/// A new queue: the endpoint's end and the connection's.
pub(crate) fn channel() -> (EventSender, EventReceiver) {
    let queue = Arc::new(Mutex::new(Queue {
        events: VecDeque::new(),
        waker: None,
        sender_gone: false,
        receiver_gone: false,
    }));
    (EventSender(queue.clone()), EventReceiver(queue))
}

#[derive(Debug)]
struct Queue {
    events: VecDeque<ConnectionEvent>,
    /// The connection driver waiting for an event.
    waker: Option<Waker>,
    /// The endpoint dropped its end: the connection learns it once the
    /// events queued before are read, as with a channel.
    sender_gone: bool,
    /// The connection is gone: events sent now are refused.
    receiver_gone: bool,
}

/// The endpoint's end.
#[derive(Debug)]
pub(crate) struct EventSender(Arc<Mutex<Queue>>);

impl EventSender {
    /// Queues `event` and wakes the connection's driver; gives the event
    /// back if the connection is gone.
    pub(crate) fn send(&self, event: ConnectionEvent) -> Result<(), ConnectionEvent> {
        let mut queue = self.0.lock().unwrap();
        if queue.receiver_gone {
            return Err(event);
        }
        queue.events.push_back(event);
        let waker = queue.waker.take();
        drop(queue);
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

impl Drop for EventSender {
    fn drop(&mut self) {
        let mut queue = self.0.lock().unwrap();
        queue.sender_gone = true;
        let waker = queue.waker.take();
        drop(queue);
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The connection's end.
#[derive(Debug)]
pub(crate) struct EventReceiver(Arc<Mutex<Queue>>);

impl EventReceiver {
    /// The next event; `None` once the endpoint is gone and every event it
    /// queued was read; otherwise pending until one is sent.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context) -> Poll<Option<ConnectionEvent>> {
        let mut queue = self.0.lock().unwrap();
        if let Some(event) = queue.events.pop_front() {
            return Poll::Ready(Some(event));
        }
        if queue.sender_gone {
            return Poll::Ready(None);
        }
        if queue.events.capacity() > KEPT_SLOTS {
            queue.events = VecDeque::new();
        }
        match &mut queue.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            waker => *waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for EventReceiver {
    fn drop(&mut self) {
        let mut queue = self.0.lock().unwrap();
        queue.receiver_gone = true;
        // Dropped outside the lock: an event holds datagrams and sockets.
        let events = std::mem::take(&mut queue.events);
        let waker = queue.waker.take();
        drop(queue);
        drop((events, waker));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn close(code: u32) -> ConnectionEvent {
        ConnectionEvent::Close {
            error_code: crate::VarInt::from_u32(code),
            reason: bytes::Bytes::new(),
        }
    }

    fn code(event: Poll<Option<ConnectionEvent>>) -> Option<u32> {
        match event {
            Poll::Ready(Some(ConnectionEvent::Close { error_code, .. })) => {
                Some(error_code.into_inner() as u32)
            }
            Poll::Ready(_) => Some(u32::MAX),
            Poll::Pending => None,
        }
    }

    #[test]
    fn events_come_in_order_then_the_senders_end() {
        let (send, mut recv) = channel();
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(code(recv.poll_recv(&mut cx)), None);
        for i in 0..10 {
            send.send(close(i)).unwrap();
        }
        for i in 0..10 {
            assert_eq!(code(recv.poll_recv(&mut cx)), Some(i));
        }
        assert_eq!(code(recv.poll_recv(&mut cx)), None);
        assert!(recv.0.lock().unwrap().events.capacity() <= KEPT_SLOTS);
        send.send(close(10)).unwrap();
        drop(send);
        assert_eq!(code(recv.poll_recv(&mut cx)), Some(10));
        assert!(matches!(recv.poll_recv(&mut cx), Poll::Ready(None)));
    }

    #[test]
    fn a_gone_connection_refuses_events() {
        let (send, recv) = channel();
        drop(recv);
        assert!(send.send(close(1)).is_err());
    }
}
