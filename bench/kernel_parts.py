"""Kernel time by function group and by system call, per request, from
`perf script` output of `perf record -g -e cpu-clock` (kernel call chains).

Usage: perf script -F comm,tid,ip,sym,dso -i perf.data \
         | python3 bench/kernel_parts.py REQUESTS FREQ COMM[,COMM...] [LABEL]
(bench/keepalive-kernel.sh). Only samples whose command name starts with
one of COMM count (tern's threads are tern and tokio-*; hitch's hitch;
the backend's nginx). Prints one line of Python dict literal,
{"label":..., "user":µs, "kernel":µs, "groups":{group: µs},
"syscalls":{name: µs}}, per request: samples / FREQ / REQUESTS.

A kernel sample goes to the group of the first frame, walking from the
leaf towards the root, that names a group: a spin unlock under
try_to_wake_up is a wake-up, a copy under tcp_sendmsg a copy. The
system call is the __x64_sys_* frame of the stack, if any: the receive
path of the peer's socket that a loopback send runs (softirq in the
sender's context) is counted under the send.
"""

import re
import sys

# (group, pattern over a frame's symbol); the first frame that matches
# any pattern decides, patterns tried in this order.
GROUPS = [
    ("sched/switch", r"^(__schedule|schedule|schedule_hrtimeout_range|finish_task_switch|pick_next_task.*|"
     r"pick_task.*|put_prev_task.*|set_next_task.*|dequeue_task.*|dequeue_entit.*|enqueue_task.*|"
     r"enqueue_entit.*|update_curr.*|__switch_to.*|switch_mm.*|update_load_avg|newidle_balance|"
     r"sched_balance.*|load_balance|__update_load_avg.*|psi_.*|check_preempt.*|resched_curr|"
     r"wakeup_preempt.*|update_rq_clock.*|prepare_task_switch|balance_fair|reweight_entity)$"),
    ("wake-up", r"^(try_to_wake_up|ttwu_.*|__wake_up.*|wake_up_q|ep_poll_callback|sock_def_readable|"
     r"sk_wake_async|select_task_rq.*|tcp_data_ready|default_wake_function|autoremove_wake_function|"
     r"pollwake|__smp_call_single_queue|send_call_function_single_ipi|native_send_call_func_single_ipi|"
     r"x2apic_send_IPI|default_send_IPI.*)$"),
    ("epoll", r"^(ep_.*|do_epoll_.*|__x64_sys_epoll.*|tcp_poll|sock_poll)$"),
    ("copy", r"^(copy_user_.*|rep_movs_alternative|_copy_to_iter|_copy_from_iter.*|skb_copy_datagram_iter|"
     r"__skb_datagram_iter|simple_copy_to_iter|copyin|copyout|memcpy.*|__memcpy.*|memcpy_orig|"
     r"skb_do_copy_data_nocache|csum_partial_copy.*)$"),
    ("memory (skb, slab)", r"^(kmem_cache_.*|__kmalloc.*|kmalloc_.*|kfree.*|__kfree_skb|kfree_skb.*|"
     r"__alloc_skb|alloc_skb.*|skb_release_.*|__slab_free|___slab_alloc|__slab_alloc.*|"
     r"slab_.*|sk_stream_alloc_skb|tcp_stream_alloc_skb|page_frag_.*|skb_page_frag_refill|"
     r"sk_page_frag_refill|__sk_mem_.*|sk_forced_mem_schedule|mem_cgroup_.*|__mod_memcg.*|"
     r"skb_attempt_defer_free|napi_consume_skb|consume_skb|__consume_stateless_skb|skb_free_head|"
     r"sk_mem_.*|__sk_mem_reclaim|__alloc_pages.*|free_unref_page.*|get_page_from_freelist|"
     r"refill_obj_stock|obj_cgroup_.*|__memcg_slab.*|drain_obj_stock)$"),
    ("tcp/ip rx (loopback softirq)", r"^(tcp_v4_rcv|tcp_v4_do_rcv|tcp_rcv_established|tcp_ack|tcp_data_queue|"
     r"tcp_event_data_recv|tcp_queue_rcv|tcp_ack_update_rtt|tcp_clean_rtx_queue|tcp_rate_.*|"
     r"tcp_rearm_rto|tcp_validate_incoming|tcp_urg|__tcp_ack_snd_check|tcp_check_space|"
     r"ip_rcv.*|ip_local_deliver.*|ip_protocol_deliver_rcu|ip_sublist_rcv.*|ip_list_rcv|"
     r"__netif_receive_skb.*|netif_receive_skb.*|process_backlog|net_rx_action|__napi_poll|"
     r"handle_softirqs|__do_softirq|do_softirq.*|__local_bh_enable_ip|netif_rx.*|enqueue_to_backlog|"
     r"loopback_xmit|tcp_filter|sk_filter.*|nf_hook.*|tcp_add_backlog|__inet_lookup.*|"
     r"inet_ehashfn|tcp_mstamp_refresh|tcp_inbound_hash|tcp_v4_fill_cb|raw_local_deliver)$"),
    ("tcp/ip tx", r"^(tcp_sendmsg.*|tcp_push|__tcp_push_pending_frames|tcp_write_xmit|__tcp_transmit_skb|"
     r"tcp_transmit_skb|ip_queue_xmit|__ip_queue_xmit|ip_output|ip_finish_output.*|ip_local_out|"
     r"__ip_local_out|__dev_queue_xmit|dev_queue_xmit|dev_hard_start_xmit|tcp_send_ack|"
     r"__tcp_send_ack.*|tcp_skb_entail|tcp_options_write|tcp_established_options|tcp_event_new_data_sent|"
     r"tcp_current_mss|tcp_send_mss|tcp_wfree|tcp_small_queue_check.*|tcp_tso_segs|"
     r"tcp_chrono_.*|skb_clone|__skb_clone|neigh_.*|validate_xmit_skb.*|ip_send_check|"
     r"sch_direct_xmit|__qdisc_run|tcp_update_skb_after_send|tcp_rbtree_insert|tcp_schedule_loss_probe|"
     r"sk_reset_timer|tcp_event_data_sent)$"),
    ("tcp rx (socket read)", r"^(tcp_recvmsg.*|tcp_cleanup_rbuf|tcp_rcv_space_adjust|skb_consume_udp|"
     r"inet_recvmsg|sock_recvmsg|sk_wait_data|tcp_recv_timestamp|__sk_flush_backlog|release_sock|"
     r"lock_sock_nested|__release_sock|tcp_release_cb)$"),
    ("syscall entry/exit, fd, security", r"^(entry_SYSCALL_64.*|do_syscall_64|syscall_exit_to_user_mode.*|"
     r"exit_to_user_mode.*|syscall_return_via_sysret|__x64_sys_.*|__do_sys_.*|__sys_.*|"
     r"fdget.*|__fget.*|fput.*|__fdget.*|sockfd_lookup_light|security_.*|apparmor_.*|bpf_lsm_.*|"
     r"sock_sendmsg.*|sock_recvmsg.*|____sys_.*|do_iter_.*|vfs_writev|vfs_readv|do_writev|do_readv|"
     r"import_iovec|__import_iovec|iovec_from_user|__rseq_handle_notify_resume|rseq_.*|"
     r"fpregs_.*|switch_fpu_return|restore_fpregs_from_fpstate|syscall_enter_from_user_mode.*|"
     r"sock_write_iter|sock_read_iter|move_addr_to_kernel|__check_object_size.*|"
     r"check_stack_object|__virt_addr_valid|x64_sys_call|arch_exit_to_user_mode_prepare.*|"
     r"syscall_trace_enter|syscall_exit_work|__traceiter_.*|__x86_indirect_thunk.*)$"),
    ("timer, irq", r"^(hrtimer_.*|__hrtimer_.*|tick_.*|asm_sysvec_.*|sysvec_.*|__sysvec_.*|irq_.*|"
     r"irqentry_.*|asm_common_interrupt|common_interrupt|run_timer_softirq|__run_timers|"
     r"call_timer_fn|tcp_delack_timer.*|tcp_write_timer.*|lapic_next_.*|clockevents_.*)$"),
]
COMPILED = [(g, re.compile(p)) for g, p in GROUPS]
# A system call's own frame: __x64_sys_X where the kernel keeps it, else
# the function it calls (writev shows as do_writev, sendto as __sys_sendto).
SYSCALL = re.compile(r"^(?:__(?:x64|ia32|se)_sys_|__sys_|ksys_|do_)"
                     r"(sendto|recvfrom|sendmsg|recvmsg|writev|readv|read|write|"
                     r"epoll_wait|epoll_pwait2?|epoll_ctl|accept4?|close|setsockopt|getsockopt)$")


def group_of(frames: list[str]) -> str:
    for sym in frames:
        for g, pat in COMPILED:
            if pat.match(sym):
                return g
    return "other kernel"


def syscall_of(frames: list[str]) -> str:
    for sym in frames:
        m = SYSCALL.match(sym)
        if m:
            return m.group(1)
    return "(not in a system call: interrupt, page fault, return to user)"


def main() -> None:
    requests, freq = int(sys.argv[1]), float(sys.argv[2])
    comms = tuple(sys.argv[3].split(","))
    label = sys.argv[4] if len(sys.argv) > 4 else sys.argv[3]
    user = kernel = 0
    groups: dict[str, int] = {}
    syscalls: dict[str, int] = {}

    def flush(comm, frames):
        nonlocal user, kernel
        if comm is None or not comm.startswith(comms):
            return
        if not frames or not frames[0][1]:
            user += 1
            return
        # Only the kernel part of the chain; a user-space leaf is user time.
        ks = [s for s, k in frames if k]
        kernel += 1
        g = group_of(ks)
        groups[g] = groups.get(g, 0) + 1
        sc = syscall_of(ks)
        syscalls[sc] = syscalls.get(sc, 0) + 1

    comm, frames = None, []
    for line in sys.stdin:
        if not line.strip():
            continue
        if not line[0].isspace():
            flush(comm, frames)
            comm, frames = line.split()[0], []
            continue
        # "	ffffffff81587288 __rseq_handle_notify_resume+0x58 ([kernel.kallsyms])"
        parts = line.split(None, 1)
        if len(parts) < 2:
            continue
        rest = parts[1]
        sym = rest.split("+0x", 1)[0].split(" (", 1)[0].strip()
        frames.append((sym, "[kernel" in rest))
    flush(comm, frames)

    us = lambda n: round(n / freq / requests * 1e6, 3)  # noqa: E731
    print(repr({
        "label": label,
        "user": us(user),
        "kernel": us(kernel),
        "groups": {g: us(n) for g, n in groups.items()},
        "syscalls": {s: us(n) for s, n in syscalls.items()},
    }))


if __name__ == "__main__":
    main()
