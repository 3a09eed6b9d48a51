package raptorx.cache

/**
 * This JVM's one instance of a cache, made by `make` from the bounds of the plan that asks
 * for it ([[apply]]), and made again when a plan asks with other bounds: what a cache keeps
 * is only an optimization, so a new bound starts an empty one. The instance it replaces is
 * handed to `retire` (to close what it holds). Thread-safe.
 */
final class PerJvm[B, C](make: B => C, retire: C => Unit = (_: C) => ()) {
  private var made: Option[(B, C)] = None

  /** The instance for `bounds`: the current one if it was made with them, else a new one. */
  def apply(bounds: B): C = synchronized {
    made match {
      case Some((b, c)) if b == bounds => c
      case old =>
        old.foreach { case (_, c) => retire(c) }
        val c = make(bounds)
        made = Some((bounds, c))
        c
    }
  }

  /** The instance as it is (tests), or null before any plan made one. */
  def current: C = synchronized(made.map(_._2).getOrElse(null.asInstanceOf[C]))
}
