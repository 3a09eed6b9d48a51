package raptorx.contract

/** The smallest JSON writer the pushed aggregation needs (values are already JSON text). */
private object Json {
  def str(s: String): String = {
    val b = new StringBuilder("\"")
    s.foreach {
      case '"' => b.append("\\\"")
      case '\\' => b.append("\\\\")
      case c if c < ' ' => b.append(f"\\u${c.toInt}%04x")
      case c => b.append(c)
    }
    b.append('"').toString
  }
  def obj(kv: (String, String)*): String = kv.map { case (k, v) => s"${str(k)}:$v" }
    .mkString("{", ",", "}")
  def arr(vs: Seq[String]): String = vs.mkString("[", ",", "]")
}
