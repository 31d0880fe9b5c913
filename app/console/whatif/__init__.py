"""The Replay page's what-if: traffic picker, candidate form, run and results, panels, plan and saved history."""
