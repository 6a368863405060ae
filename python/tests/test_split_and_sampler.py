"""split_batch and BalancedBatchSampler on one process (no collectives)."""
import math
import os
import random
import unittest


from hetccl.torch import BalancedBatchSampler, split_batch


class SplitBatch(unittest.TestCase):
    def test_proportional_to_speed(self):
        self.assertEqual(split_batch(100, [3.0, 1.0]), [75, 25])
        self.assertEqual(split_batch(10, [1.0, 1.0, 1.0]), [4, 3, 3])  # ties: the lower rank

    def test_every_rank_gets_a_sample_and_the_sum_holds(self):
        rng = random.Random(7)
        for _ in range(2000):
            ranks = rng.randint(1, 9)
            speeds = [rng.uniform(0.01, 100.0) ** rng.choice([1, 3]) for _ in range(ranks)]
            batch = rng.randint(ranks, 5000)
            counts = split_batch(batch, speeds)
            self.assertEqual(sum(counts), batch)
            self.assertTrue(all(c >= 1 for c in counts))
            # within one sample of the ideal share of the samples beyond the first each
            for c, s in zip(counts, speeds):
                self.assertLess(abs((c - 1) - (batch - ranks) * s / sum(speeds)), 1.0 + 1e-9)
        self.assertEqual(split_batch(3, [1000.0, 1.0, 1.0]), [1, 1, 1])

    def test_bad_input_names_the_rank_and_the_value(self):
        for speeds, rank in (([1.0, 0.0], 1), ([math.nan, 1.0], 0), ([1.0, 2.0, -3.0], 2), ([1.0, math.inf], 1)):
            with self.assertRaisesRegex(ValueError, f"rank {rank} reports a speed of"):
                split_batch(8, speeds)
        with self.assertRaisesRegex(ValueError, "global batch of 2 cannot give each of the 3 ranks"):
            split_batch(2, [1.0, 1.0, 1.0])
        with self.assertRaisesRegex(ValueError, "must be an integer"):
            split_batch(8.0, [1.0])


class Sampler(unittest.TestCase):
    def draw(self, size, batch, world, changes, epoch=0, seed=3):
        """Each step's indices, per rank; `changes` maps a step to new counts."""
        samplers = [BalancedBatchSampler(size, batch, rank=r, world_size=world, seed=seed) for r in range(world)]
        iters = []
        for s in samplers:
            s.set_epoch(epoch)
            iters.append(iter(s))
        steps = []
        for step in range(len(samplers[0])):
            if step in changes:
                for s in samplers:
                    s.set_counts(changes[step])
            steps.append([next(it) for it in iters])
        for it in iters:
            self.assertIsNone(next(it, None))
        return samplers[0], steps

    def test_every_sample_once_per_epoch_while_the_shares_move(self):
        sampler, steps = self.draw(120, 12, 3, {2: [6, 4, 2], 5: [1, 1, 10], 7: [10, 1, 1]})
        self.assertEqual(len(steps), 10)
        seen = [i for step in steps for share in step for i in share]
        self.assertEqual(sorted(seen), list(range(120)))
        for step in steps:
            self.assertEqual(sum(len(share) for share in step), 12)  # the global batch never changes
        self.assertEqual([len(s) for s in steps[5]], [1, 1, 10])
        self.assertEqual(seen, sampler.permutation().tolist())  # ranks in order make up the permutation

    def test_the_remainder_waits_for_another_epoch(self):
        for epoch in range(3):
            sampler, steps = self.draw(103, 10, 3, {1: [5, 3, 2]}, epoch=epoch)
            seen = [i for step in steps for share in step for i in share]
            self.assertEqual(len(seen), 100)
            self.assertEqual(len(set(seen)), 100)
            self.assertEqual(seen, sampler.permutation()[:100].tolist())
        a = self.draw(103, 10, 3, {}, epoch=0)[1]
        b = self.draw(103, 10, 3, {}, epoch=1)[1]
        self.assertNotEqual(a, b)  # another permutation each epoch

    def test_bad_settings(self):
        with self.assertRaisesRegex(ValueError, "rank 0: the dataset \\(5 samples\\) is smaller than one global batch"):
            BalancedBatchSampler(5, 8, rank=0, world_size=2)
        with self.assertRaisesRegex(ValueError, "cannot give each of the 4 ranks"):
            BalancedBatchSampler(100, 3, rank=1, world_size=4)
        s = BalancedBatchSampler(100, 8, rank=1, world_size=2)
        with self.assertRaisesRegex(ValueError, "sum to the global batch 8"):
            s.set_counts([4, 5])
        with self.assertRaisesRegex(ValueError, "at least 1"):
            s.set_counts([8, 0])


class Timer(unittest.TestCase):
    def test_a_pause_is_left_out_of_the_step(self):
        import time
        from hetccl.torch import StepTimer
        timer = StepTimer("cpu")
        timer.start(10)
        time.sleep(0.02)
        timer.pause()
        time.sleep(0.3)  # e.g. an all-reduce call that waits for a slower peer
        timer.resume()
        time.sleep(0.02)
        timer.end()
        # 10 samples in the ~0.04 s computed (sleeps run long on a loaded machine: at most 0.2 s)
        self.assertGreater(timer.speed(), 10 / 0.2)
        self.assertLess(timer.speed(), 10 / 0.04 * 1.01)


    def test_a_whole_step_leaves_out_the_wait_at_its_meeting_point(self):
        import time
        from hetccl.torch import StepTimer
        timer = StepTimer("cpu")
        timer.start(10)
        time.sleep(0.02)          # forward and backward
        timer.end(whole=True)     # the last gradient bucket's call
        time.sleep(0.3)           # waiting for a slower peer
        timer.arrived()
        time.sleep(0.02)          # the optimizer step, the next batch
        self.assertEqual(timer.speed(), 0.0)  # the step ends where the next begins
        timer.start(10)
        self.assertGreater(timer.speed(), 10 / 0.2)
        self.assertLess(timer.speed(), 10 / 0.04 * 1.01)

    def test_a_whole_step_without_its_arrival_counts_all_of_it(self):
        import time
        from hetccl.torch import StepTimer
        timer = StepTimer("cpu")
        timer.start(10)
        timer.end(whole=True)
        time.sleep(0.1)
        timer.start(10)
        self.assertLess(timer.speed(), 10 / 0.1 * 1.01)


class Native(unittest.TestCase):
    def test_hetccls_line_for_this_process(self):
        """Through the library CI builds (HETCCL_LIB), LD_PRELOADed as a user would."""
        import subprocess
        import sys
        library = os.environ.get("HETCCL_LIB", "")
        code = "import hetccl.torch.native as n; print(n.describe_local_rank())"
        plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        self.assertEqual(plain.stdout.strip(), "None")  # no hetccl in the process
        if not library:
            self.skipTest("HETCCL_LIB not set (scripts/python-check.sh sets it)")
        env = dict(os.environ, LD_PRELOAD=library, HETCCL_DOMAIN="left", HETCCL_DEVICE="host")  # a CPU rank, GPU or not
        loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
        self.assertEqual(loaded.stdout.strip(), "domain left, host, hetccl-native")


if __name__ == "__main__":
    unittest.main()
