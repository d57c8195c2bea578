;; Wrong result length, preemption-cost world.
;; A component implementing the sluice:policy/preemption-cost world by hand: `init` succeeds, `costs`
;; returns one boost and one protection flag whatever the number of candidates. Used by
;; sdk/tests/sandbox.rs.
(component
  (core module $m
    (memory (export "memory") 32)
    (global $bump (mut i32) (i32.const 65536))
    ;; Bump allocator for the host's lowering of arguments.
    (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
      (local $p i32)
      (local.set $p
        (i32.and
          (i32.add (global.get $bump) (i32.sub (local.get 2) (i32.const 1)))
          (i32.sub (i32.const 0) (local.get 2))))
      (global.set $bump (i32.add (local.get $p) (local.get 3)))
      (local.get $p))
    ;; result<_, string> = ok: the zeroed word at address 0.
    (func (export "init") (param i32 i32) (result i32) (i32.const 0))
    ;; The batch has more flat values than fit in parameters, so it arrives as one pointer.
    (func (export "costs") (param i32) (result i32)
      (i32.const 16))
    ;; An ok result<cost-answers, _> at 16 with one boost (7, at 64) and one flag (1, at 72).
    (data (i32.const 16) "\00\00\00\00" "\40\00\00\00" "\01\00\00\00" "\48\00\00\00" "\01\00\00\00")
    (data (i32.const 64) "\07\00\00\00")
    (data (i32.const 72) "\01"))
  (core instance $i (instantiate $m))
  (alias core export $i "memory" (core memory $mem))
  (alias core export $i "cabi_realloc" (core func $realloc))

  (type $batch-def (record
    (field "names" (list string)) (field "workload" (list u32)) (field "cluster-queue" (list u32))
    (field "priority" (list s32)) (field "admitted-seconds" (list f64))
    (field "since-checkpoint-seconds" (list f64)) (field "times-preempted" (list u32))
    (field "gpus" (list u32)) (field "gpu-hours-at-stake" (list f64)) (field "preemptor-priority" s32)))
  (export $batch "candidate-batch" (type $batch-def))
  (type $answers-def (record (field "boost" (list s32)) (field "protected" (list u8))))
  (export $answers "cost-answers" (type $answers-def))

  (func $init (param "config" string) (result (result (error string)))
    (canon lift (core func $i "init") (memory $mem) (realloc $realloc)))
  (export "init" (func $init))
  (func $costs (param "batch" $batch) (result (result $answers (error string)))
    (canon lift (core func $i "costs") (memory $mem) (realloc $realloc)))
  (export "costs" (func $costs)))
